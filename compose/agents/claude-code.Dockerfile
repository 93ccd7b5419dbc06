# Claude Code in the agent shell (docs/agents.md). Needs a workstation with the npm
# registry: npm fetches @anthropic-ai/claude-code at build time. Built by
# compose/agents/claude-code.yml; written, not built on the offline development machine.
ARG AGENT_SHELL_IMAGE=ironcurtain/agent-shell:dev
FROM ${AGENT_SHELL_IMAGE}
USER root
RUN set -eu; apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm; \
    npm install -g @anthropic-ai/claude-code; npm cache clean --force; \
    apt-get clean; rm -rf /var/lib/apt/lists/*; \
    claude --version
USER 10001:10001
