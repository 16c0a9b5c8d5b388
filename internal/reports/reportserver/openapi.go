package reportserver

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The OpenAPI definitions of the served types, which the generic API
// server needs (its field manager's type converter) and publishes for
// clients. The API machinery's own types (metadata, lists, watch events,
// status) are the generated definitions an API server module publishes;
// scope is described loosely.
const pkg = "github.com/verdict-dev/verdict/internal/reports/reportserver."

var (
	objectMeta = metav1.ObjectMeta{}.OpenAPIModelName()
	listMeta   = metav1.ListMeta{}.OpenAPIModelName()
	timestamp  = metav1.Timestamp{}.OpenAPIModelName()
	objectRef  = corev1.ObjectReference{}.OpenAPIModelName()
)

func definitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := apiextensionsopenapi.GetOpenAPIDefinitions(ref)
	for k, v := range served(ref) {
		defs[k] = v
	}
	return defs
}

func served(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	str := func(desc string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}, Description: desc}}
	}
	integer := func(desc string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"integer"}, Format: "int64", Description: desc}}
	}
	refTo := func(name string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(name)}}
	}
	free := func(desc string) common.OpenAPIDefinition {
		return common.OpenAPIDefinition{Schema: spec.Schema{
			SchemaProps:      spec.SchemaProps{Type: []string{"object"}, Description: desc},
			VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-preserve-unknown-fields": true}},
		}}
	}
	object := func(desc string, props map[string]spec.Schema, deps ...string) common.OpenAPIDefinition {
		return common.OpenAPIDefinition{Schema: spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Description: desc, Properties: props}}, Dependencies: deps}
	}
	report := func(desc, apiVersion string) common.OpenAPIDefinition {
		return object(desc, map[string]spec.Schema{
			"apiVersion": str(apiVersion),
			"kind":       str("the kind"),
			"source":     str("what made the report (openreports.io only)"),
			"metadata":   refTo(objectMeta),
			"scope":      refTo(objectRef),
			"summary":    refTo(pkg + "Summary"),
			"results": {SchemaProps: spec.SchemaProps{Type: []string{"array"}, Items: &spec.SchemaOrArray{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(pkg + "Result")}}}},
				VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-list-type": "atomic"}}},
		}, objectMeta, objectRef, pkg+"Summary", pkg+"Result")
	}
	list := func(desc, item, apiVersion string) common.OpenAPIDefinition {
		return object(desc, map[string]spec.Schema{
			"apiVersion": str(apiVersion),
			"kind":       str("the kind"),
			"metadata":   refTo(listMeta),
			"items": {SchemaProps: spec.SchemaProps{Type: []string{"array"}, Items: &spec.SchemaOrArray{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(pkg + item)}}}},
				VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-list-type": "atomic"}}},
		}, listMeta, pkg+item)
	}
	return map[string]common.OpenAPIDefinition{
		pkg + "PolicyReport":            report("the report of one namespaced resource", GroupVersion.String()),
		pkg + "ClusterPolicyReport":     report("the report of one cluster-scoped resource", GroupVersion.String()),
		pkg + "PolicyReportList":        list("PolicyReports", "PolicyReport", GroupVersion.String()),
		pkg + "ClusterPolicyReportList": list("ClusterPolicyReports", "ClusterPolicyReport", GroupVersion.String()),
		pkg + "Report":                  report("the report of one namespaced resource", OpenReports.String()),
		pkg + "ClusterReport":           report("the report of one cluster-scoped resource", OpenReports.String()),
		pkg + "ReportList":              list("Reports", "Report", OpenReports.String()),
		pkg + "ClusterReportList":       list("ClusterReports", "ClusterReport", OpenReports.String()),
		pkg + "Summary": object("results by outcome", map[string]spec.Schema{
			"pass": integer("passed"), "fail": integer("failed"), "warn": integer("warnings"), "error": integer("errors"), "skip": integer("skipped"),
		}),
		pkg + "Result": object("one rule's result", map[string]spec.Schema{
			"source": str("verdict"), "policy": str("the policy"), "rule": str("the rule"), "category": str("the policy's category"),
			"severity": str("the policy's severity"), "result": str("pass, fail, warn, error or skip"), "message": str("what the rule said"),
			"scored":     {SchemaProps: spec.SchemaProps{Type: []string{"boolean"}}},
			"timestamp":  refTo(timestamp),
			"properties": {SchemaProps: spec.SchemaProps{Type: []string{"object"}, AdditionalProperties: &spec.SchemaOrBool{Allows: true, Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}}}}}},
		}, timestamp),
		objectRef: free("the resource the report is about"),
		pkg + "AdmissionDenial": object("a denied admission request, from the admission log", map[string]spec.Schema{
			"apiVersion": str(Decisions.String()),
			"kind":       str("the kind"),
			"metadata":   refTo(objectMeta),
			"requestUid": str("the AdmissionRequest's uid"),
			"webhook":    str("the endpoint that answered"),
			"operation":  str("CREATE, UPDATE, DELETE or CONNECT"),
			"dryRun":     {SchemaProps: spec.SchemaProps{Type: []string{"boolean"}}},
			"verified":   {SchemaProps: spec.SchemaProps{Type: []string{"boolean"}, Description: "the webhook's caller proved to be the API server (mutual TLS)"}},
			"message":    str("the denial's message, as the requester got it"),
			"replica":    str("the webhook replica that answered"),
			"time":       str("when it was answered"),
			"resource":   freeSchema("the resource: group, version, kind, resource, subResource, namespace, name, uid"),
			"user":       freeSchema("the requester: username, uid, groups"),
			"findings": {SchemaProps: spec.SchemaProps{Type: []string{"array"}, Items: &spec.SchemaOrArray{Schema: ptr(freeSchema("a policy and rule that denied or warned, with its message"))}},
				VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-list-type": "atomic"}}},
		}, objectMeta),
		pkg + "AdmissionDenialList": list("AdmissionDenials", "AdmissionDenial", Decisions.String()),
	}
}

// freeSchema is an object schema whose fields are not described.
func freeSchema(desc string) spec.Schema {
	return spec.Schema{
		SchemaProps:      spec.SchemaProps{Type: []string{"object"}, Description: desc},
		VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-preserve-unknown-fields": true}},
	}
}

func ptr[T any](v T) *T { return &v }
