package cliflag

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestList(t *testing.T) {
	defaults := []string{"a"}
	var plain []string
	fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	List(fs, "replace", "", func() { defaults = nil }, func(s string) error {
		if s == "bad" {
			return errors.New("refused")
		}
		defaults = append(defaults, s)
		return nil
	})
	Strings(fs, "add", "", &plain)
	if err := fs.Parse([]string{"--replace= b, ,c", "--replace=d", "--add=x,y", "--add", "z"}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(defaults, ",") != "b,c,d" || strings.Join(plain, ",") != "x,y,z" {
		t.Fatalf("replace %v, add %v", defaults, plain)
	}
	if err := fs.Parse([]string{"--replace=bad"}); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("refused item: %v", err)
	}
}
