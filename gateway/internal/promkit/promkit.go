// Package promkit builds the gateway's Prometheus metrics (name and help,
// no namespace or constant labels) and registers them, so each component's
// metric list reads as one line a metric.
package promkit

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Counter returns an unregistered counter.
func Counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// CounterVec returns an unregistered counter with the given labels.
func CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Gauge returns an unregistered gauge.
func Gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// GaugeFunc returns an unregistered gauge whose value f gives when scraped.
func GaugeFunc(name, help string, f func() float64) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
}

// Histogram returns an unregistered histogram with the given buckets.
func Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

// HistogramVec returns an unregistered histogram with the given buckets
// and labels.
func HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// Register registers cs on reg, in order; a nil reg registers nothing. The
// error names what the metrics belong to ("registering <what> metrics"); when
// a metric is already registered, dupHint (if not empty) is added to it.
func Register(reg prometheus.Registerer, what, dupHint string, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if dupHint != "" && errors.As(err, &are) {
				return fmt.Errorf("registering %s metrics: %w (%s)", what, err, dupHint)
			}
			return fmt.Errorf("registering %s metrics: %w", what, err)
		}
	}
	return nil
}
