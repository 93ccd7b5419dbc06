// Package deploy holds the tests of the deployment artefacts: the Compose
// topology (compose/docker-compose.yml, compose/gateway.yaml,
// compose/.env.example), the Cloud Run manifest (compose/cloudrun), the
// Kubernetes manifests (compose/kubernetes, rendered with the kustomize library
// and their NetworkPolicies evaluated) and the
// gateway, agent and agent-shell images (images/). They check the isolation invariants
// of DESIGN §2 on the files themselves, so that an edit that puts the agent
// on a routable network, publishes the ops port or hands the agent a secret
// fails the build before anything is deployed. The image tests need Docker
// and the images from `make images`; the file tests need nothing.
package deploy
