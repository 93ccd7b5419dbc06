package githubrelay

import (
	"io"
	"net/http"
	"sort"
	"testing"
	"time"
)

// BenchmarkRelayOverhead alternates one GET of a pull request straight to
// the fake GitHub API and one through the relay (agent token, decision of
// github__pr_view through the hub with an in-memory audit sink, forward,
// streamed answer), and reports the median and 99th percentile of each and
// their differences (the relay's added time over the upstream's own; the
// target is <= 1 ms median, <= 3 ms p99).
// Run: go test -run XXX -bench RelayOverhead -benchtime 2000x ./internal/doors/githubrelay
func BenchmarkRelayOverhead(b *testing.B) {
	e := newEnv(b, false)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	get := func(url, auth string) time.Duration {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", auth)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return time.Since(start)
	}
	direct, relayed := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	for i := 0; i < 20; i++ { // warm both connections and caches
		get(e.gh.srv.URL+"/repos/acme/app/pulls/1", "token "+gatewayTok)
		get(e.relay.URL+"/github/repos/acme/app/pulls/1", "token "+agentTok)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		direct = append(direct, get(e.gh.srv.URL+"/repos/acme/app/pulls/1", "token "+gatewayTok))
		relayed = append(relayed, get(e.relay.URL+"/github/repos/acme/app/pulls/1", "token "+agentTok))
	}
	b.StopTimer()
	md, mr := median(direct), median(relayed)
	pd, pr := quantile(direct, 0.99), quantile(relayed, 0.99)
	b.ReportMetric(float64(md.Microseconds()), "direct-median-µs")
	b.ReportMetric(float64(mr.Microseconds()), "relay-median-µs")
	b.ReportMetric(float64((mr - md).Microseconds()), "overhead-median-µs")
	b.ReportMetric(float64(pd.Microseconds()), "direct-p99-µs")
	b.ReportMetric(float64(pr.Microseconds()), "relay-p99-µs")
	b.ReportMetric(float64((pr - pd).Microseconds()), "overhead-p99-µs")
}

func median(d []time.Duration) time.Duration { return quantile(d, 0.5) }

// quantile returns the q-quantile of d (nearest rank).
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(int(q*float64(len(s))), len(s)-1)]
}
