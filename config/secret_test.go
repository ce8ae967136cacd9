package config

import (
	"strings"
	"testing"
)

// secretFiles holds, per secret setting, a tierd.yaml that sets it to
// %s (the rest of the file valid, base included).
var secretFiles = map[string]string{
	"kafka.sasl.password": base + "kafka:\n  bootstrap_servers: [k:9092]\n  sasl:\n    mechanism: PLAIN\n    username: u\n    password: %s\n",
}

// TestSecretsCovered: every secret setting has a file in secretFiles, so
// the tests below cover a secret added later.
func TestSecretsCovered(t *testing.T) {
	n := 0
	for _, k := range allKeys() {
		if Secret(k) {
			n++
			if _, ok := secretFiles[k]; !ok {
				t.Errorf("%s is a secret without a file in secretFiles", k)
			}
		}
	}
	if n == 0 {
		t.Fatal("no setting is a secret")
	}
}

// TestSecretNotInLoadErrors: a secret's value of the wrong type, one the
// parser refuses, or one Validate refuses makes an error that names the
// key (or the line) and the problem, never the value.
func TestSecretNotInLoadErrors(t *testing.T) {
	const secret = "hunter2x"
	for key, file := range secretFiles {
		leaf := key[strings.LastIndex(key, ".")+1:]
		for name, tc := range map[string]struct{ value, want string }{
			"a list":             {"[" + secret + "]", key + ": a list: want a single value"},
			"a section":          {"{" + secret + ": " + secret + "}", key + ": a section: want a single value"},
			"a tag it is not":    {"!!int " + secret, "cannot decode !!str a value (not shown) as a !!int"},
			"a float tag":        {"!!float " + secret, "as a !!float"},
			"a bad base64":       {"!!binary " + secret + "!", "base64"},
			"refused by checks":  {secret + "\n    " + leaf + "_file: /p", leaf},
			"quoted, then a tag": {"\"" + secret + "\" !!str", "line"},
		} {
			_, err := loadYAML(t, strings.Replace(file, "%s", tc.value, 1))
			if err == nil {
				t.Errorf("%s, %s: loaded", key, name)
				continue
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s, %s: the error shows the value: %v", key, name, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s, %s: %v, want %q", key, name, err, tc.want)
			}
		}
	}
}

// TestNumericSecretIsText: a secret written as a number (password: 123456,
// 1.5, 1e5, 0123) is the text as written, as in a Kafka properties file,
// not a number refused or reformatted.
func TestNumericSecretIsText(t *testing.T) {
	for _, v := range []string{"123456", "1.5", "1e5", "0123", "0x1F", "true"} {
		cfg, err := loadYAML(t, strings.Replace(secretFiles["kafka.sasl.password"], "%s", v, 1))
		if err != nil {
			if strings.Contains(err.Error(), v) {
				t.Errorf("%s: the error shows the value: %v", v, err)
			}
			t.Errorf("%s: %v", v, err)
			continue
		}
		if got := cfg.Kafka.Cluster.SASL.Password; got != v {
			t.Errorf("password: %s loaded as %q", v, got)
		}
	}
}
