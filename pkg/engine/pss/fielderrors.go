package pss

import (
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
)

// fieldErrors lists the offending fields of a failed check, with the paths
// and values Kyverno's field-level reporting uses. The upstream checks only
// say which containers failed; this walks the pod again with the same rules
// to name the fields. It is called only for checks that failed.
func fieldErrors(id string, version api.Version, meta *metav1.ObjectMeta, spec *corev1.PodSpec) []FieldError {
	var errs fieldList
	switch id {
	case "privileged":
		visit(spec, func(c *corev1.Container, path string) {
			if sc := c.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
				errs.forbidden(path+".securityContext.privileged", true)
			}
		})
	case "hostPorts":
		visit(spec, func(c *corev1.Container, path string) {
			for j, p := range c.Ports {
				if p.HostPort != 0 {
					errs.forbidden(path+".ports["+strconv.Itoa(j)+"].hostPort", int(p.HostPort))
				}
			}
		})
	case "procMount", "procMount_restricted":
		visit(spec, func(c *corev1.Container, path string) {
			if sc := c.SecurityContext; sc != nil && sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
				errs.forbidden(path+".securityContext.procMount", string(*sc.ProcMount))
			}
		})
	case "capabilities_baseline":
		visit(spec, func(c *corev1.Container, path string) {
			if sc := c.SecurityContext; sc != nil && sc.Capabilities != nil {
				var bad []string
				for _, cp := range sc.Capabilities.Add {
					if !baselineCapabilities[string(cp)] {
						bad = append(bad, string(cp))
					}
				}
				if len(bad) > 0 {
					errs.forbidden(path+".securityContext.capabilities.add", bad)
				}
			}
		})
	case "capabilities_restricted":
		visit(spec, func(c *corev1.Container, path string) {
			sc := c.SecurityContext
			if sc == nil || sc.Capabilities == nil {
				errs.required(path + ".securityContext.capabilities.drop")
				return
			}
			droppedAll := false
			for _, cp := range sc.Capabilities.Drop {
				if cp == "ALL" {
					droppedAll = true
				}
			}
			if !droppedAll {
				errs.required(path + ".securityContext.capabilities.drop")
			}
			var bad []string
			for _, cp := range sc.Capabilities.Add {
				if cp != "NET_BIND_SERVICE" {
					bad = append(bad, string(cp))
				}
			}
			if len(bad) > 0 {
				errs.forbidden(path+".securityContext.capabilities.add", bad)
			}
		})
	case "windowsHostProcess":
		if sc := spec.SecurityContext; sc != nil && sc.WindowsOptions != nil && sc.WindowsOptions.HostProcess != nil && *sc.WindowsOptions.HostProcess {
			errs.forbidden("spec.securityContext.windowsOptions.hostProcess", true)
		}
		visit(spec, func(c *corev1.Container, path string) {
			if sc := c.SecurityContext; sc != nil && sc.WindowsOptions != nil && sc.WindowsOptions.HostProcess != nil && *sc.WindowsOptions.HostProcess {
				errs.forbidden(path+".securityContext.windowsOptions.hostProcess", true)
			}
		})
	case "seLinuxOptions":
		allowed := seLinuxTypes
		if version.Older(api.MajorMinorVersion(1, 31)) {
			allowed = seLinuxTypesV1_0
		}
		check := func(o *corev1.SELinuxOptions, prefix string) {
			if o == nil {
				return
			}
			if !allowed[o.Type] {
				errs.forbidden(prefix+".seLinuxOptions.type", o.Type)
			}
			if o.User != "" {
				errs.forbidden(prefix+".seLinuxOptions.user", o.User)
			}
			if o.Role != "" {
				errs.forbidden(prefix+".seLinuxOptions.role", o.Role)
			}
		}
		if spec.SecurityContext != nil {
			check(spec.SecurityContext.SELinuxOptions, "spec.securityContext")
		}
		visit(spec, func(c *corev1.Container, path string) {
			if c.SecurityContext != nil {
				check(c.SecurityContext.SELinuxOptions, path+".securityContext")
			}
		})
	case "seccompProfile_baseline":
		if version.Older(api.MajorMinorVersion(1, 19)) {
			seccompAnnotations(meta, spec, &errs)
			break
		}
		if sc := spec.SecurityContext; sc != nil && sc.SeccompProfile != nil && !validSeccomp(sc.SeccompProfile.Type) {
			errs.forbidden("spec.securityContext.seccompProfile.type", string(sc.SeccompProfile.Type))
		}
		visit(spec, func(c *corev1.Container, path string) {
			if sc := c.SecurityContext; sc != nil && sc.SeccompProfile != nil && !validSeccomp(sc.SeccompProfile.Type) {
				errs.forbidden(path+".securityContext.seccompProfile.type", string(sc.SeccompProfile.Type))
			}
		})
	case "seccompProfile_restricted":
		podSet := false
		if sc := spec.SecurityContext; sc != nil && sc.SeccompProfile != nil {
			if validSeccomp(sc.SeccompProfile.Type) {
				podSet = true
			} else {
				errs.forbidden("spec.securityContext.seccompProfile.type", string(sc.SeccompProfile.Type))
			}
		}
		visit(spec, func(c *corev1.Container, path string) {
			switch sc := c.SecurityContext; {
			case sc != nil && sc.SeccompProfile != nil:
				if !validSeccomp(sc.SeccompProfile.Type) {
					errs.forbidden(path+".securityContext.seccompProfile.type", string(sc.SeccompProfile.Type))
				}
			case !podSet:
				errs.required(path + ".securityContext.seccompProfile.type")
			}
		})
	case "sysctls":
		allowed := sysctlsFor(version)
		if sc := spec.SecurityContext; sc != nil {
			for i, s := range sc.Sysctls {
				if !allowed[s.Name] {
					errs.forbidden("spec.securityContext.sysctls["+strconv.Itoa(i)+"].name", s.Name)
				}
			}
		}
	case "hostPathVolumes":
		for i, v := range spec.Volumes {
			if v.HostPath != nil {
				errs.forbidden("spec.volumes["+strconv.Itoa(i)+"].hostPath", v.HostPath.Path)
			}
		}
	case "restrictedVolumes":
		for i, v := range spec.Volumes {
			if t := restrictedVolumeType(&v.VolumeSource); t != "" {
				errs.forbidden("spec.volumes["+strconv.Itoa(i)+"]."+t, nil)
			}
		}
	case "hostNamespaces":
		if spec.HostNetwork {
			errs.forbidden("spec.hostNetwork", true)
		}
		if spec.HostPID {
			errs.forbidden("spec.hostPID", true)
		}
		if spec.HostIPC {
			errs.forbidden("spec.hostIPC", true)
		}
	case "appArmorProfile":
		if sc := spec.SecurityContext; sc != nil && sc.AppArmorProfile != nil && !validAppArmorType(sc.AppArmorProfile.Type) {
			errs.forbidden("spec.securityContext.appArmorProfile.type", string(sc.AppArmorProfile.Type))
		}
		visit(spec, func(c *corev1.Container, path string) {
			if sc := c.SecurityContext; sc != nil && sc.AppArmorProfile != nil && !validAppArmorType(sc.AppArmorProfile.Type) {
				errs.forbidden(path+".securityContext.appArmorProfile.type", string(sc.AppArmorProfile.Type))
			}
		})
		for _, k := range sortedKeys(meta.Annotations) {
			v := meta.Annotations[k]
			if strings.HasPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) && !validAppArmorAnnotation(v) {
				errs.forbidden("metadata.annotations["+k+"]", v)
			}
		}
	case "hostProbesAndHostLifecycle":
		visit(spec, func(c *corev1.Container, path string) {
			probe := func(p *corev1.Probe, name string) {
				if p != nil {
					hostHandlers(p.HTTPGet, p.TCPSocket, path+"."+name, &errs)
				}
			}
			probe(c.LivenessProbe, "livenessProbe")
			probe(c.ReadinessProbe, "readinessProbe")
			probe(c.StartupProbe, "startupProbe")
			if l := c.Lifecycle; l != nil {
				if l.PostStart != nil {
					hostHandlers(l.PostStart.HTTPGet, l.PostStart.TCPSocket, path+".lifecycle.postStart", &errs)
				}
				if l.PreStop != nil {
					hostHandlers(l.PreStop.HTTPGet, l.PreStop.TCPSocket, path+".lifecycle.preStop", &errs)
				}
			}
		})
	case "runAsNonRoot":
		podTrue := false
		if sc := spec.SecurityContext; sc != nil && sc.RunAsNonRoot != nil {
			if *sc.RunAsNonRoot {
				podTrue = true
			} else {
				errs.forbidden("spec.securityContext.runAsNonRoot", false)
			}
		}
		visit(spec, func(c *corev1.Container, path string) {
			switch sc := c.SecurityContext; {
			case sc != nil && sc.RunAsNonRoot != nil:
				if !*sc.RunAsNonRoot {
					errs.forbidden(path+".securityContext.runAsNonRoot", false)
				}
			case !podTrue:
				errs.required(path + ".securityContext.runAsNonRoot")
			}
		})
	case "runAsUser":
		if sc := spec.SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			errs.forbidden("spec.securityContext.runAsUser", 0)
		}
		visit(spec, func(c *corev1.Container, path string) {
			if sc := c.SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
				errs.forbidden(path+".securityContext.runAsUser", 0)
			}
		})
	case "allowPrivilegeEscalation":
		visit(spec, func(c *corev1.Container, path string) {
			switch sc := c.SecurityContext; {
			case sc == nil || sc.AllowPrivilegeEscalation == nil:
				errs.required(path + ".securityContext.allowPrivilegeEscalation")
			case *sc.AllowPrivilegeEscalation:
				errs.forbidden(path+".securityContext.allowPrivilegeEscalation", true)
			}
		})
	}
	return errs
}

type fieldList []FieldError

func (l *fieldList) forbidden(path string, value any) {
	*l = append(*l, FieldError{Field: path, Type: Forbidden, BadValue: value})
}

func (l *fieldList) required(path string) {
	*l = append(*l, FieldError{Field: path, Type: Required})
}

// visit calls fn for every container with its path, init containers first,
// then containers, then ephemeral containers, as pod-security-admission
// does.
func visit(spec *corev1.PodSpec, fn func(c *corev1.Container, path string)) {
	for i := range spec.InitContainers {
		fn(&spec.InitContainers[i], "spec.initContainers["+strconv.Itoa(i)+"]")
	}
	for i := range spec.Containers {
		fn(&spec.Containers[i], "spec.containers["+strconv.Itoa(i)+"]")
	}
	for i := range spec.EphemeralContainers {
		fn((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon), "spec.ephemeralContainers["+strconv.Itoa(i)+"]")
	}
}

func hostHandlers(get *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction, path string, errs *fieldList) {
	if get != nil && get.Host != "" {
		errs.forbidden(path+".httpGet.host", get.Host)
	}
	if tcp != nil && tcp.Host != "" {
		errs.forbidden(path+".tcpSocket.host", tcp.Host)
	}
}

func seccompAnnotations(meta *metav1.ObjectMeta, spec *corev1.PodSpec, errs *fieldList) {
	const podKey = corev1.SeccompPodAnnotationKey
	if v, ok := meta.Annotations[podKey]; ok && !validSeccompAnnotation(v) {
		errs.forbidden("metadata.annotations["+podKey+"]", v)
	}
	visit(spec, func(c *corev1.Container, _ string) {
		key := corev1.SeccompContainerAnnotationKeyPrefix + c.Name
		if v, ok := meta.Annotations[key]; ok && !validSeccompAnnotation(v) {
			errs.forbidden("metadata.annotations["+key+"]", v)
		}
	})
}

func validSeccomp(t corev1.SeccompProfileType) bool {
	return t == corev1.SeccompProfileTypeRuntimeDefault || t == corev1.SeccompProfileTypeLocalhost
}

func validSeccompAnnotation(v string) bool {
	return v == corev1.SeccompProfileRuntimeDefault ||
		v == corev1.DeprecatedSeccompProfileDockerDefault ||
		strings.HasPrefix(v, corev1.SeccompLocalhostProfileNamePrefix)
}

func validAppArmorType(t corev1.AppArmorProfileType) bool {
	return t == corev1.AppArmorProfileTypeRuntimeDefault || t == corev1.AppArmorProfileTypeLocalhost
}

func validAppArmorAnnotation(v string) bool {
	return v == "" ||
		v == corev1.DeprecatedAppArmorBetaProfileRuntimeDefault ||
		strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix)
}

// restrictedVolumeType names the volume source when the restricted profile
// forbids it, "" when it is allowed.
func restrictedVolumeType(v *corev1.VolumeSource) string {
	switch {
	case v.ConfigMap != nil, v.CSI != nil, v.DownwardAPI != nil, v.EmptyDir != nil,
		v.Ephemeral != nil, v.Image != nil, v.PersistentVolumeClaim != nil,
		v.Projected != nil, v.Secret != nil:
		return ""
	case v.HostPath != nil:
		return "hostPath"
	case v.GCEPersistentDisk != nil:
		return "gcePersistentDisk"
	case v.AWSElasticBlockStore != nil:
		return "awsElasticBlockStore"
	case v.GitRepo != nil:
		return "gitRepo"
	case v.NFS != nil:
		return "nfs"
	case v.ISCSI != nil:
		return "iscsi"
	case v.Glusterfs != nil:
		return "glusterfs"
	case v.RBD != nil:
		return "rbd"
	case v.FlexVolume != nil:
		return "flexVolume"
	case v.Cinder != nil:
		return "cinder"
	case v.CephFS != nil:
		return "cephfs"
	case v.Flocker != nil:
		return "flocker"
	case v.FC != nil:
		return "fc"
	case v.AzureFile != nil:
		return "azureFile"
	case v.VsphereVolume != nil:
		return "vsphereVolume"
	case v.Quobyte != nil:
		return "quobyte"
	case v.AzureDisk != nil:
		return "azureDisk"
	case v.PhotonPersistentDisk != nil:
		return "photonPersistentDisk"
	case v.PortworxVolume != nil:
		return "portworxVolume"
	case v.ScaleIO != nil:
		return "scaleIO"
	case v.StorageOS != nil:
		return "storageos"
	}
	return "unknown"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func set(items ...string) map[string]bool {
	m := make(map[string]bool, len(items))
	for _, s := range items {
		m[s] = true
	}
	return m
}

var (
	baselineCapabilities = set("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
		"MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")

	seLinuxTypesV1_0 = set("", "container_t", "container_init_t", "container_kvm_t")
	seLinuxTypes     = set("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")

	sysctlsV1_0 = []string{"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
		"net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"}
	sysctlsV1_27 = append(append([]string{}, sysctlsV1_0...), "net.ipv4.ip_local_reserved_ports")
	sysctlsV1_29 = append(append([]string{}, sysctlsV1_27...), "net.ipv4.tcp_keepalive_time",
		"net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes")
	sysctlsV1_32 = append(append([]string{}, sysctlsV1_29...), "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")

	sysctlSets = []struct {
		since   api.Version
		allowed map[string]bool
	}{
		{api.MajorMinorVersion(1, 32), set(sysctlsV1_32...)},
		{api.MajorMinorVersion(1, 29), set(sysctlsV1_29...)},
		{api.MajorMinorVersion(1, 27), set(sysctlsV1_27...)},
		{api.MajorMinorVersion(1, 0), set(sysctlsV1_0...)},
	}
)

func sysctlsFor(v api.Version) map[string]bool {
	for _, s := range sysctlSets {
		if !v.Older(s.since) {
			return s.allowed
		}
	}
	return sysctlSets[len(sysctlSets)-1].allowed
}
