# aider in the agent shell (docs/agents.md#aider). Needs PyPI at build time (aider-chat),
# installed in a virtual environment with Debian's Python 3.11. Built by
# compose/agents/aider.yml; written, not built here.
ARG AGENT_SHELL_IMAGE=ironcurtain/agent-shell:dev
FROM ${AGENT_SHELL_IMAGE}
USER root
RUN set -eu; apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv; \
    python3 -m venv /opt/aider; /opt/aider/bin/pip install --no-cache-dir aider-chat; \
    ln -s /opt/aider/bin/aider /usr/local/bin/aider; \
    apt-get clean; rm -rf /var/lib/apt/lists/*; \
    aider --version
USER 10001:10001
