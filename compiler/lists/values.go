package lists

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"golang.org/x/net/publicsuffix"

	"ironcurtain.dev/gateway/policy"
)

var hostLabels = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$`)

// CheckValue reports why v is not an acceptable entry of a list of typ.
// Domain entries must name a registrable domain or something under one: a
// list entry of "*", "com" or "*.co.uk" would open a whole suffix.
func CheckValue(typ, v string) error {
	raw := v
	v = strings.TrimSpace(v)
	if v == "" {
		return errors.New("empty value")
	}
	if strings.HasPrefix(v, "@") {
		return fmt.Errorf("%q looks like a list reference", raw)
	}
	if strings.ContainsFunc(v, func(r rune) bool { return r < 0x21 || r == 0x7f }) {
		return fmt.Errorf("%q contains spaces or control characters", raw)
	}
	switch typ {
	case policy.MatchDomains:
		host := strings.ToLower(v)
		wild := false
		if h, ok := strings.CutPrefix(host, "*."); ok {
			host, wild = h, true
		}
		if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
			return fmt.Errorf("%q is an IP address, not a domain", raw)
		}
		if !hostLabels.MatchString(host) {
			return fmt.Errorf("%q is not a domain name or *.domain pattern", raw)
		}
		if last := host[strings.LastIndexByte(host, '.')+1:]; strings.Trim(last, "0123456789") == "" {
			return fmt.Errorf("%q is numeric, which resolvers may read as an IP address", raw)
		}
		if err := policy.ValidateDomainPattern(strings.ToLower(v)); err != nil {
			return fmt.Errorf("the policy engine refuses it: %w", err)
		}
		etld1, err := publicsuffix.EffectiveTLDPlusOne(host)
		if err != nil {
			return fmt.Errorf("%q is a public suffix, not a registrable domain", raw)
		}
		if wild && len(host) < len(etld1) {
			return fmt.Errorf("%q would match a whole public suffix", raw)
		}
	case policy.MatchEmails:
		local, domain, ok := strings.Cut(v, "@")
		if !ok || local == "" || strings.Contains(domain, "@") || !strings.Contains(domain, ".") {
			return fmt.Errorf("%q is not an email address", raw)
		}
	case policy.MatchIdentifiers:
		if len(v) > 200 {
			return fmt.Errorf("%q is longer than 200 characters", raw[:40]+"...")
		}
	default:
		return fmt.Errorf("unknown list type %q", typ)
	}
	return nil
}

func checkValues(typ string, values []string) error {
	var errs []error
	for i, v := range values {
		if err := CheckValue(typ, v); err != nil {
			errs = append(errs, fmt.Errorf("values[%d]: %w", i, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove or fix these entries:\n%w", errors.Join(errs...))
	}
	return nil
}
