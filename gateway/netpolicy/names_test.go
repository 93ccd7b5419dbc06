package netpolicy

import (
	"errors"
	"net/netip"
	"testing"
)

func TestSpecialName(t *testing.T) {
	tests := []struct {
		host string
		want Class
	}{
		{"localhost", Loopback}, {"LOCALHOST.", Loopback}, {"a.b.localhost", Loopback}, {"ip6-localhost", Loopback},
		{"localhost.localdomain", Loopback}, {"metadata.google.internal", Metadata}, {"metadata", Metadata},
		{"instance-data", Metadata}, {"instance-data.ec2.internal", Metadata}, {"METADATA.GOOGLE.INTERNAL.", Metadata},
		{"example.com", Public}, {"localhost.example.com", Public}, {"notlocalhost", Public}, {"metadata.example", Public},
		{"127.0.0.1", Public}, // an IP literal is classified, not named
	}
	for _, tc := range tests {
		h, err := ParseHost(tc.host)
		if err != nil {
			t.Fatalf("%s: %v", tc.host, err)
		}
		c, _, ok := SpecialName(h)
		if ok != (tc.want != Public) || c != tc.want {
			t.Errorf("SpecialName(%s) = %v %v, want %v", tc.host, c, ok, tc.want)
		}
	}
}

func TestCheckHost(t *testing.T) {
	strict := AddressPolicy{}
	loose := AddressPolicy{UnsafeAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16")}}
	tests := []struct {
		host          string
		strict, loose error // nil: allowed
	}{
		{"example.com", nil, nil},
		{"8.8.8.8", nil, nil},
		{"localhost", Loopback, nil},
		{"x.localhost", Loopback, nil},
		{"127.0.0.1", Loopback, nil},
		{"metadata.google.internal", Metadata, Metadata}, // names of the metadata service: never
		{"169.254.169.254", Metadata, nil},               // an explicit unsafe allowance of the address lets it through, as the dialer does
		{"10.0.0.1", Private, Private},
	}
	for _, tc := range tests {
		h, err := ParseHost(tc.host)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct {
			name string
			pol  AddressPolicy
			want error
		}{{"strict", strict, tc.strict}, {"loose", loose, tc.loose}} {
			err := p.pol.CheckHost(h)
			if p.want == nil {
				if err != nil {
					t.Errorf("%s %s: %v", p.name, tc.host, err)
				}
				continue
			}
			if !errors.Is(err, p.want) || !errors.Is(err, ErrAddressDenied) {
				t.Errorf("%s %s: err = %v, want %v", p.name, tc.host, err, p.want)
			}
		}
	}
}
