package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"
)

// page is what every page template gets.
type page struct {
	Title    string
	Nav      string // the active navigation entry
	Operator string
	CSRF     string
	Live     bool // the page has live updates (loads the script)
	Error    string
	Notice   string
	Body     any
}

// pageNames are the templates/*.html files that are pages; each is parsed
// with layout.html.
var pageNames = []string{"signin", "error", "escalations", "escalation", "sessions", "timeline", "policy"}

var funcs = template.FuncMap{
	"text":   func(s string) Text { return NewText(s) },
	"line":   func(s string) Text { return NewText(oneLine(s, 200)) },
	"json":   func(raw json.RawMessage) Text { return NewText(PrettyJSON(raw)) },
	"ts":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"tsp":    tsp,
	"ago":    ago,
	"dur":    func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"bytes":  humanBytes,
	"usd":    func(f float64) string { return fmt.Sprintf("$%.4f", f) },
	"status": func(s string) string { return "st-" + cssWord(s) },
	"okid":   validID,
}

func tsp(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func ago(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + (-d).Round(time.Second).String()
	}
	return d.Round(time.Second).String() + " ago"
}

func humanBytes(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// cssWord keeps a word usable as part of a class name (letters, digits, -).
func cssWord(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		}
		if b.Len() >= 24 {
			break
		}
	}
	return b.String()
}

func parsePages() (map[string]*template.Template, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html")
	if err != nil {
		return nil, fmt.Errorf("parsing console layout: %w", err)
	}
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("parsing console page %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// render executes a page into a buffer first, so a template error never
// sends half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	if s, ok := r.Context().Value(ctxKey{}).(opSession); ok {
		p.Operator, p.CSRF = s.operator, s.csrf
	}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "page", p); err != nil {
		c.log.Error("console: rendering a page", "page", name, "err", err)
		http.Error(w, "internal error; see the gateway log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// fragment executes one named template of a page (the live refresh).
func (c *Console) fragment(w http.ResponseWriter, r *http.Request, pageName, tmpl string, p page) {
	if s, ok := r.Context().Value(ctxKey{}).(opSession); ok {
		p.Operator, p.CSRF = s.operator, s.csrf
	}
	var buf bytes.Buffer
	if err := c.pages[pageName].ExecuteTemplate(&buf, tmpl, p); err != nil {
		c.log.Error("console: rendering a fragment", "page", pageName, "err", err)
		http.Error(w, "internal error; see the gateway log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = buf.WriteTo(w)
}

func (c *Console) errorPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error", page{Title: http.StatusText(status), Error: msg})
}

// pageWriter renders a page in parts into one buffer, so that listing rows
// are rendered once and added while they fit the page's byte budget.
type pageWriter struct {
	t    *template.Template
	buf  bytes.Buffer
	rows int // bytes of rows added
	err  error
}

func (c *Console) writer(name string) *pageWriter { return &pageWriter{t: c.pages[name]} }

// part renders a named template.
func (pw *pageWriter) part(tmpl string, data any) {
	if pw.err == nil {
		pw.err = pw.t.ExecuteTemplate(&pw.buf, tmpl, data)
	}
}

// row renders a listing row when the rows so far leave room for it (the
// first row always fits). It reports whether the row was added.
func (pw *pageWriter) row(tmpl string, data any) bool {
	if pw.err != nil {
		return false
	}
	mark := pw.buf.Len()
	if pw.err = pw.t.ExecuteTemplate(&pw.buf, tmpl, data); pw.err != nil {
		return false
	}
	n := pw.buf.Len() - mark
	if pw.rows > 0 && pw.rows+n > PageBytes {
		pw.buf.Truncate(mark)
		return false
	}
	pw.rows += n
	return true
}

// send writes the page, or an error page when rendering failed.
func (c *Console) send(w http.ResponseWriter, r *http.Request, pw *pageWriter) {
	if pw.err != nil {
		c.log.Error("console: rendering a page", "err", pw.err)
		http.Error(w, "internal error; see the gateway log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = pw.buf.WriteTo(w)
}

// withSession fills the page's operator and CSRF token.
func withSession(r *http.Request, p page) page {
	if s, ok := r.Context().Value(ctxKey{}).(opSession); ok {
		p.Operator, p.CSRF = s.operator, s.csrf
	}
	return p
}
