package web

import "testing"

func TestHostPolicy(t *testing.T) {
	cases := []struct {
		name   string
		policy HostPolicy
		allow  []string
		refuse []string
	}{
		{"loopback listen", HostPolicy{Listen: "127.0.0.1:8080"},
			[]string{"127.0.0.1:8080", "127.0.0.1", "127.9.9.9:1", "[::1]:8080", "localhost:8080", "LOCALHOST", "localhost.",
				"app.localhost:8080"},
			[]string{"", "evil.example", "evil.example:8080", "127.0.0.1.evil.example", "10.0.0.5:8080", "localhost.evil.example"}},
		{"public names", HostPolicy{Listen: "127.0.0.1:8080", Public: []string{"gateway.example.com", "2001:db8::1"}},
			[]string{"gateway.example.com", "Gateway.Example.COM:8443", "gateway.example.com.:443", "[2001:db8:0::1]:8080"},
			[]string{"example.com", "sub.gateway.example.com", "gateway.example.com.evil.example", "[2001:db8::2]"}},
		{"listen on an address", HostPolicy{Listen: "192.168.1.5:8080"},
			[]string{"192.168.1.5:8080", "192.168.1.5:9", "localhost"},
			[]string{"192.168.1.6:8080", "myhost:8080"}},
		{"listen on every address", HostPolicy{Listen: ":8080"},
			[]string{"192.168.1.5:8080", "[2001:db8::7]:8080", "10.1.2.3"},
			[]string{"myhost:8080", "evil.example"}},
		{"listen on 0.0.0.0", HostPolicy{Listen: "0.0.0.0:8080"}, []string{"203.0.113.9:8080"}, []string{"evil.example"}},
		{"listen on a name", HostPolicy{Listen: "myhost.lan:8080"}, []string{"MyHost.lan:8080"}, []string{"otherhost.lan", "10.0.0.1"}},
	}
	for _, c := range cases {
		p := newHostPolicy(c.policy)
		for _, h := range c.allow {
			if !p.allows(h) {
				t.Errorf("%s: %q refused", c.name, h)
			}
		}
		for _, h := range c.refuse {
			if p.allows(h) {
				t.Errorf("%s: %q allowed", c.name, h)
			}
		}
	}
}
