package kafkaacl

import "testing"

// TestPrincipalRules: ssl.principal.mapping.rules as Kafka's
// SslPrincipalMapper applies them (its tests' cases): the first rule whose
// pattern matches the whole name gives it, replaced and cased; DEFAULT
// gives the name itself; no rule that applies is a refusal.
func TestPrincipalRules(t *testing.T) {
	rules := "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/," +
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L," +
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U," +
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U," +
		"DEFAULT"
	m, err := ParsePrincipalRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "Duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		if got, ok := m.Name(dn); !ok || got != want {
			t.Errorf("%s: %q %v, want %q", dn, got, ok, want)
		}
	}
	strict, _ := ParsePrincipalRules("RULE:^CN=([a-z]+),O=Acme$/$1/")
	if _, ok := strict.Name("CN=eve,O=Other"); ok {
		t.Error("a name no rule applies to was mapped")
	}
	esc, err := ParsePrincipalRules(`RULE:^CN=(.*)\/x$/$1\/y/`)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := esc.Name("CN=a/x"); got != "a/y" {
		t.Errorf("escaped '/': %q", got)
	}
	for _, bad := range []string{"RULE:^CN=(.*)$/$1", "RULE:(?<=x)a/b/", "DEFAULT DEFAULT", "RULES"} {
		if _, err := ParsePrincipalRules(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
