# The OpenHands CLI in the agent shell (docs/agents.md#openhands): the CLI, not the web app,
# because the web app starts its sandboxes through the Docker socket, which would give the
# agent the host. Needs PyPI at build time; uv fetches the Python the CLI requires.
# Built by compose/agents/openhands.yml; written, not built here.
ARG AGENT_SHELL_IMAGE=ironcurtain/agent-shell:dev
FROM ${AGENT_SHELL_IMAGE}
USER root
RUN set -eu; apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv; \
    python3 -m venv /opt/uv; /opt/uv/bin/pip install --no-cache-dir uv; \
    UV_TOOL_DIR=/opt/uv-tools UV_TOOL_BIN_DIR=/usr/local/bin UV_PYTHON_INSTALL_DIR=/opt/uv-python \
      /opt/uv/bin/uv tool install --python 3.12 openhands; \
    chmod -R a+rX /opt/uv-tools /opt/uv-python; \
    apt-get clean; rm -rf /var/lib/apt/lists/* /root/.cache; \
    openhands --version
USER 10001:10001
