// Package llmprovider defines the model APIs the gateway talks to:
// provider names, default base URLs and key variables, how a provider's
// credential is sent, and the price table that turns token counts into
// estimated US dollars.
//
// The model relay (doors/llmrelay) forwards the agent's calls with it, and
// the auto-approver (autoapprove) makes the gateway's own calls with it;
// neither imports the other. It holds no connections and does no I/O
// besides reading a key variable through the getenv it is given.
package llmprovider
