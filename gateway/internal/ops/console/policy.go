package console

import (
	"net/http"
	"time"
)

// disagreementRows is the shadow disagreements the policy page lists.
const disagreementRows = 100

type policyBody struct {
	Known         bool
	Status        PolicyStatus
	Disagreements []Disagreement
	Now           time.Time
}

func (c *Console) policyPage(w http.ResponseWriter, r *http.Request) {
	body := policyBody{Now: c.now()}
	if c.deps.Policy != nil {
		body.Known, body.Status = true, c.deps.Policy()
	}
	if body.Known && body.Status.Shadow != "" {
		var err error
		if body.Disagreements, err = c.deps.Store.Disagreements(r.Context(), disagreementRows); err != nil {
			c.fail(w, r, err)
			return
		}
	}
	c.render(w, r, http.StatusOK, "policy", page{Title: "Policy", Nav: "policy", Body: body})
}
