package patch

import (
	"reflect"
	"testing"
)

func TestListSchema(t *testing.T) {
	tests := map[string]struct {
		object      string
		path        []string // "[]" steps into list elements
		associative bool
		keys        []string
	}{
		"pod containers":          {`{apiVersion: v1, kind: Pod}`, []string{"spec", "containers"}, true, []string{"name"}},
		"container env":           {`{apiVersion: v1, kind: Pod}`, []string{"spec", "containers", "[]", "env"}, true, []string{"name"}},
		"container ports":         {`{apiVersion: v1, kind: Pod}`, []string{"spec", "containers", "[]", "ports"}, true, []string{"containerPort", "protocol"}},
		"pod volumes":             {`{apiVersion: v1, kind: Pod}`, []string{"spec", "volumes"}, true, []string{"name"}},
		"pod tolerations":         {`{apiVersion: v1, kind: Pod}`, []string{"spec", "tolerations"}, false, nil},
		"finalizers":              {`{apiVersion: v1, kind: Pod}`, []string{"metadata", "finalizers"}, true, nil},
		"deployment containers":   {`{apiVersion: apps/v1, kind: Deployment}`, []string{"spec", "template", "spec", "containers"}, true, []string{"name"}},
		"cronjob init containers": {`{apiVersion: batch/v1, kind: CronJob}`, []string{"spec", "jobTemplate", "spec", "template", "spec", "initContainers"}, true, []string{"name"}},
		"service ports":           {`{apiVersion: v1, kind: Service}`, []string{"spec", "ports"}, true, []string{"port", "protocol"}},
		"labels are a map":        {`{apiVersion: v1, kind: Pod}`, []string{"metadata", "labels", "x"}, false, nil},
		"unknown kind":            {`{apiVersion: example.com/v1, kind: Widget}`, []string{"spec", "containers"}, false, nil},
		"unknown field":           {`{apiVersion: v1, kind: Pod}`, []string{"spec", "nope"}, false, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := schemaForObject(doc(t, tc.object))
			for _, step := range tc.path {
				if step == "[]" {
					s = s.elem()
				} else {
					s = s.field(step)
				}
			}
			if s.associative() != tc.associative {
				t.Fatalf("associative = %v, want %v", s.associative(), tc.associative)
			}
			if tc.associative && !reflect.DeepEqual(s.keys, tc.keys) {
				t.Errorf("keys = %v, want %v", s.keys, tc.keys)
			}
		})
	}
}
