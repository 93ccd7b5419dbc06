# OpenAI Codex CLI in the agent shell (docs/agents.md). Needs the npm registry at build
# time (@openai/codex). Its MCP setting names the gateway and the variable holding the
# agent token (never the token): the file is seeded into the shell's home volume when that
# volume is created. Built by compose/agents/codex.yml; written, not built here.
ARG AGENT_SHELL_IMAGE=ironcurtain/agent-shell:dev
FROM ${AGENT_SHELL_IMAGE}
USER root
RUN set -eu; apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm; \
    npm install -g @openai/codex; npm cache clean --force; \
    apt-get clean; rm -rf /var/lib/apt/lists/*; \
    codex --version
COPY codex-config.toml /home/ironcurtain/.codex/config.toml
RUN chown -R 10001:10001 /home/ironcurtain/.codex
USER 10001:10001
