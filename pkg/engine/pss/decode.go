package pss

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// decodePod fills the fields of a Pod that the Pod Security Standards checks
// read, straight from the document, without a JSON round trip (which costs
// ten times more than the checks). Fields the checks ignore are skipped; the
// fields read are type-checked as JSON decoding would, so a document that
// fails here fails a JSON decode too. TestDecodeMatchesJSON checks that both give
// the same results.
func decodePod(doc map[string]any) (*corev1.Pod, error) {
	d := decoder{}
	pod := &corev1.Pod{}
	if meta := d.object(doc, "metadata"); meta != nil {
		pod.Name = d.str(meta, "name")
		pod.Namespace = d.str(meta, "namespace")
		pod.Annotations = d.strMap(meta, "annotations")
	}
	if spec := d.object(doc, "spec"); spec != nil {
		d.podSpec(spec, &pod.Spec)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPod, d.err)
	}
	return pod, nil
}

type decoder struct {
	err error
	// The pod's *bool and *string fields and capability lists point into
	// these, a few allocations for the whole pod rather than one per
	// field (a full slab is left to the fields pointing into it).
	bools []bool
	strs  []string
	caps  []corev1.Capability
}

// slabSize is how many values a slab of the decoder holds.
const slabSize = 16

func (d *decoder) newBool(b bool) *bool {
	if len(d.bools) == cap(d.bools) {
		d.bools = make([]bool, 0, slabSize)
	}
	d.bools = append(d.bools, b)
	return &d.bools[len(d.bools)-1]
}

func (d *decoder) newString(s string) *string {
	if len(d.strs) == cap(d.strs) {
		d.strs = make([]string, 0, slabSize)
	}
	d.strs = append(d.strs, s)
	return &d.strs[len(d.strs)-1]
}

func (d *decoder) fail(key string, want string, got any) {
	if d.err == nil {
		d.err = fmt.Errorf("field %s: expected %s, got %T", key, want, got)
	}
}

// object returns m[key] as a map; nil when absent or null.
func (d *decoder) object(m map[string]any, key string) map[string]any {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		d.fail(key, "object", v)
	}
	return o
}

func (d *decoder) list(m map[string]any, key string) []any {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		d.fail(key, "list", v)
	}
	return l
}

func (d *decoder) str(m map[string]any, key string) string {
	v, ok := m[key]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		d.fail(key, "string", v)
	}
	return s
}

func (d *decoder) strPtr(m map[string]any, key string) *string {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	return d.newString(d.str(m, key))
}

func (d *decoder) boolean(m map[string]any, key string) bool {
	b, _ := d.boolValue(m, key)
	return b
}

func (d *decoder) boolPtr(m map[string]any, key string) *bool {
	if b, ok := d.boolValue(m, key); ok {
		return d.newBool(b)
	}
	return nil
}

// boolValue is m[key] as a bool; ok is false when it is absent, null or
// not a bool (a failure).
func (d *decoder) boolValue(m map[string]any, key string) (b, ok bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return false, false
	}
	if b, ok = v.(bool); !ok {
		d.fail(key, "bool", v)
	}
	return b, ok
}

func (d *decoder) integer(m map[string]any, key string, min, max float64) (int64, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return 0, false
	}
	f, ok := document.Number(v)
	if !ok || f != math.Trunc(f) || f < min || f > max {
		d.fail(key, "integer", v)
		return 0, false
	}
	return int64(f), true
}

func (d *decoder) strMap(m map[string]any, key string) map[string]string {
	o := d.object(m, key)
	if o == nil {
		return nil
	}
	out := make(map[string]string, len(o))
	for k := range o {
		out[k] = d.str(o, k)
	}
	return out
}

// capList reads a list of capabilities (strings; a null item is ""). An
// empty list gives nil.
func (d *decoder) capList(m map[string]any, key string) []corev1.Capability {
	l := d.list(m, key)
	if len(l) == 0 {
		return nil
	}
	if cap(d.caps)-len(d.caps) < len(l) {
		d.caps = make([]corev1.Capability, 0, max(slabSize, len(l)))
	}
	start := len(d.caps)
	for _, v := range l {
		s, ok := v.(string)
		if !ok && v != nil {
			d.fail(key, "string", v)
		}
		d.caps = append(d.caps, corev1.Capability(s))
	}
	// Its own capacity only: an append to one list never writes into
	// the next.
	return d.caps[start:len(d.caps):len(d.caps)]
}

func (d *decoder) podSpec(m map[string]any, spec *corev1.PodSpec) {
	spec.HostNetwork = d.boolean(m, "hostNetwork")
	spec.HostPID = d.boolean(m, "hostPID")
	spec.HostIPC = d.boolean(m, "hostIPC")
	spec.HostUsers = d.boolPtr(m, "hostUsers")
	if os := d.object(m, "os"); os != nil {
		spec.OS = &corev1.PodOS{Name: corev1.OSName(d.str(os, "name"))}
	}
	if sc := d.object(m, "securityContext"); sc != nil {
		psc := &corev1.PodSecurityContext{
			RunAsNonRoot:    d.boolPtr(sc, "runAsNonRoot"),
			SELinuxOptions:  d.seLinux(sc),
			SeccompProfile:  d.seccomp(sc),
			AppArmorProfile: d.appArmor(sc),
			WindowsOptions:  d.windows(sc),
		}
		if u, ok := d.integer(sc, "runAsUser", math.MinInt64, math.MaxInt64); ok {
			psc.RunAsUser = &u
		}
		sysctls := d.list(sc, "sysctls")
		if len(sysctls) > 0 {
			psc.Sysctls = make([]corev1.Sysctl, 0, len(sysctls))
		}
		for _, item := range sysctls {
			s, ok := item.(map[string]any)
			if !ok {
				if item != nil {
					d.fail("sysctls", "object", item)
				}
				psc.Sysctls = append(psc.Sysctls, corev1.Sysctl{})
				continue
			}
			psc.Sysctls = append(psc.Sysctls, corev1.Sysctl{Name: d.str(s, "name"), Value: d.str(s, "value")})
		}
		spec.SecurityContext = psc
	}
	volumes := d.list(m, "volumes")
	if len(volumes) > 0 {
		spec.Volumes = make([]corev1.Volume, 0, len(volumes))
	}
	for _, item := range volumes {
		v, ok := item.(map[string]any)
		if !ok && item != nil {
			d.fail("volumes", "object", item)
		}
		spec.Volumes = append(spec.Volumes, d.volume(v))
	}
	spec.InitContainers = d.containers(m, "initContainers")
	spec.Containers = d.containers(m, "containers")
	ephemeral := d.containers(m, "ephemeralContainers")
	if len(ephemeral) > 0 {
		spec.EphemeralContainers = make([]corev1.EphemeralContainer, 0, len(ephemeral))
	}
	for _, c := range ephemeral {
		spec.EphemeralContainers = append(spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon(c),
		})
	}
}

func (d *decoder) containers(m map[string]any, key string) []corev1.Container {
	items := d.list(m, key)
	if items == nil {
		return nil
	}
	out := make([]corev1.Container, len(items))
	for i, item := range items {
		c, ok := item.(map[string]any)
		if !ok {
			if item != nil {
				d.fail(key, "object", item)
			}
			continue
		}
		d.container(c, &out[i])
	}
	return out
}

func (d *decoder) container(m map[string]any, c *corev1.Container) {
	c.Name = d.str(m, "name")
	c.Image = d.str(m, "image")
	ports := d.list(m, "ports")
	if len(ports) > 0 {
		c.Ports = make([]corev1.ContainerPort, 0, len(ports))
	}
	for _, item := range ports {
		p, ok := item.(map[string]any)
		if !ok {
			if item != nil {
				d.fail("ports", "object", item)
			}
			c.Ports = append(c.Ports, corev1.ContainerPort{})
			continue
		}
		port := corev1.ContainerPort{}
		if hp, ok := d.integer(p, "hostPort", math.MinInt32, math.MaxInt32); ok {
			port.HostPort = int32(hp)
		}
		c.Ports = append(c.Ports, port)
	}
	if sc := d.object(m, "securityContext"); sc != nil {
		csc := &corev1.SecurityContext{
			Privileged:               d.boolPtr(sc, "privileged"),
			AllowPrivilegeEscalation: d.boolPtr(sc, "allowPrivilegeEscalation"),
			RunAsNonRoot:             d.boolPtr(sc, "runAsNonRoot"),
			SELinuxOptions:           d.seLinux(sc),
			SeccompProfile:           d.seccomp(sc),
			AppArmorProfile:          d.appArmor(sc),
			WindowsOptions:           d.windows(sc),
		}
		if u, ok := d.integer(sc, "runAsUser", math.MinInt64, math.MaxInt64); ok {
			csc.RunAsUser = &u
		}
		if pm := d.strPtr(sc, "procMount"); pm != nil {
			t := corev1.ProcMountType(*pm)
			csc.ProcMount = &t
		}
		if caps := d.object(sc, "capabilities"); caps != nil {
			csc.Capabilities = &corev1.Capabilities{Add: d.capList(caps, "add"), Drop: d.capList(caps, "drop")}
		}
		c.SecurityContext = csc
	}
	c.LivenessProbe = d.probe(m, "livenessProbe")
	c.ReadinessProbe = d.probe(m, "readinessProbe")
	c.StartupProbe = d.probe(m, "startupProbe")
	if l := d.object(m, "lifecycle"); l != nil {
		c.Lifecycle = &corev1.Lifecycle{PostStart: d.handler(l, "postStart"), PreStop: d.handler(l, "preStop")}
	}
}

func (d *decoder) probe(m map[string]any, key string) *corev1.Probe {
	p := d.object(m, key)
	if p == nil {
		return nil
	}
	get, tcp := d.hosts(p)
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: get, TCPSocket: tcp}}
}

func (d *decoder) handler(m map[string]any, key string) *corev1.LifecycleHandler {
	h := d.object(m, key)
	if h == nil {
		return nil
	}
	get, tcp := d.hosts(h)
	return &corev1.LifecycleHandler{HTTPGet: get, TCPSocket: tcp}
}

func (d *decoder) hosts(m map[string]any) (*corev1.HTTPGetAction, *corev1.TCPSocketAction) {
	var get *corev1.HTTPGetAction
	var tcp *corev1.TCPSocketAction
	if g := d.object(m, "httpGet"); g != nil {
		get = &corev1.HTTPGetAction{Host: d.str(g, "host")}
	}
	if t := d.object(m, "tcpSocket"); t != nil {
		tcp = &corev1.TCPSocketAction{Host: d.str(t, "host")}
	}
	return get, tcp
}

func (d *decoder) seLinux(m map[string]any) *corev1.SELinuxOptions {
	o := d.object(m, "seLinuxOptions")
	if o == nil {
		return nil
	}
	return &corev1.SELinuxOptions{User: d.str(o, "user"), Role: d.str(o, "role"), Type: d.str(o, "type"), Level: d.str(o, "level")}
}

func (d *decoder) seccomp(m map[string]any) *corev1.SeccompProfile {
	o := d.object(m, "seccompProfile")
	if o == nil {
		return nil
	}
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileType(d.str(o, "type")), LocalhostProfile: d.strPtr(o, "localhostProfile")}
}

func (d *decoder) appArmor(m map[string]any) *corev1.AppArmorProfile {
	o := d.object(m, "appArmorProfile")
	if o == nil {
		return nil
	}
	return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileType(d.str(o, "type")), LocalhostProfile: d.strPtr(o, "localhostProfile")}
}

func (d *decoder) windows(m map[string]any) *corev1.WindowsSecurityContextOptions {
	o := d.object(m, "windowsOptions")
	if o == nil {
		return nil
	}
	return &corev1.WindowsSecurityContextOptions{HostProcess: d.boolPtr(o, "hostProcess")}
}

// volumeSources lists the JSON names of the volume sources with a setter
// marking the source as present: the checks only ask which source a volume
// uses (and the path of a hostPath).
var volumeSources = map[string]func(*corev1.VolumeSource){
	"configMap":             func(v *corev1.VolumeSource) { v.ConfigMap = &corev1.ConfigMapVolumeSource{} },
	"csi":                   func(v *corev1.VolumeSource) { v.CSI = &corev1.CSIVolumeSource{} },
	"downwardAPI":           func(v *corev1.VolumeSource) { v.DownwardAPI = &corev1.DownwardAPIVolumeSource{} },
	"emptyDir":              func(v *corev1.VolumeSource) { v.EmptyDir = &corev1.EmptyDirVolumeSource{} },
	"ephemeral":             func(v *corev1.VolumeSource) { v.Ephemeral = &corev1.EphemeralVolumeSource{} },
	"image":                 func(v *corev1.VolumeSource) { v.Image = &corev1.ImageVolumeSource{} },
	"persistentVolumeClaim": func(v *corev1.VolumeSource) { v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{} },
	"projected":             func(v *corev1.VolumeSource) { v.Projected = &corev1.ProjectedVolumeSource{} },
	"secret":                func(v *corev1.VolumeSource) { v.Secret = &corev1.SecretVolumeSource{} },
	"gcePersistentDisk":     func(v *corev1.VolumeSource) { v.GCEPersistentDisk = &corev1.GCEPersistentDiskVolumeSource{} },
	"awsElasticBlockStore":  func(v *corev1.VolumeSource) { v.AWSElasticBlockStore = &corev1.AWSElasticBlockStoreVolumeSource{} },
	"gitRepo":               func(v *corev1.VolumeSource) { v.GitRepo = &corev1.GitRepoVolumeSource{} },
	"nfs":                   func(v *corev1.VolumeSource) { v.NFS = &corev1.NFSVolumeSource{} },
	"iscsi":                 func(v *corev1.VolumeSource) { v.ISCSI = &corev1.ISCSIVolumeSource{} },
	"glusterfs":             func(v *corev1.VolumeSource) { v.Glusterfs = &corev1.GlusterfsVolumeSource{} },
	"rbd":                   func(v *corev1.VolumeSource) { v.RBD = &corev1.RBDVolumeSource{} },
	"flexVolume":            func(v *corev1.VolumeSource) { v.FlexVolume = &corev1.FlexVolumeSource{} },
	"cinder":                func(v *corev1.VolumeSource) { v.Cinder = &corev1.CinderVolumeSource{} },
	"cephfs":                func(v *corev1.VolumeSource) { v.CephFS = &corev1.CephFSVolumeSource{} },
	"flocker":               func(v *corev1.VolumeSource) { v.Flocker = &corev1.FlockerVolumeSource{} },
	"fc":                    func(v *corev1.VolumeSource) { v.FC = &corev1.FCVolumeSource{} },
	"azureFile":             func(v *corev1.VolumeSource) { v.AzureFile = &corev1.AzureFileVolumeSource{} },
	"vsphereVolume":         func(v *corev1.VolumeSource) { v.VsphereVolume = &corev1.VsphereVirtualDiskVolumeSource{} },
	"quobyte":               func(v *corev1.VolumeSource) { v.Quobyte = &corev1.QuobyteVolumeSource{} },
	"azureDisk":             func(v *corev1.VolumeSource) { v.AzureDisk = &corev1.AzureDiskVolumeSource{} },
	"photonPersistentDisk":  func(v *corev1.VolumeSource) { v.PhotonPersistentDisk = &corev1.PhotonPersistentDiskVolumeSource{} },
	"portworxVolume":        func(v *corev1.VolumeSource) { v.PortworxVolume = &corev1.PortworxVolumeSource{} },
	"scaleIO":               func(v *corev1.VolumeSource) { v.ScaleIO = &corev1.ScaleIOVolumeSource{} },
	"storageos":             func(v *corev1.VolumeSource) { v.StorageOS = &corev1.StorageOSVolumeSource{} },
}

func (d *decoder) volume(m map[string]any) corev1.Volume {
	v := corev1.Volume{}
	if m == nil {
		return v
	}
	v.Name = d.str(m, "name")
	for key, val := range m {
		set, known := volumeSources[key]
		if !known || val == nil {
			continue
		}
		if _, ok := val.(map[string]any); !ok {
			d.fail(key, "object", val)
			continue
		}
		set(&v.VolumeSource)
	}
	if hp := d.object(m, "hostPath"); hp != nil {
		v.HostPath = &corev1.HostPathVolumeSource{Path: d.str(hp, "path")}
	}
	return v
}
