package cli

import "sigs.k8s.io/yaml"

func yamlMarshal(v any) ([]byte, error) { return yaml.Marshal(v) }
