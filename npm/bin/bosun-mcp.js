#!/usr/bin/env node
// npx launcher for bosun (a Python MCP server on PyPI): `npx -y bosun-mcp [bosun stdio args]`.
// It runs `bosun stdio`, which attaches to (or starts) the bosun daemon of $BOSUN_HOME and relays
// stdio to it. Resolution order:
//   1. $BOSUN_PYTHON -m bosun stdio            (explicit interpreter, e.g. a venv's python)
//   2. uvx --from bosun-mcp==<version> bosun-mcp (uv fetches the pinned PyPI release)
//   3. python3 / python >= 3.11 with bosun importable: -m bosun stdio
//   4. nothing: install instructions on stderr, exit 127.
// stdout is the MCP wire: this script never writes to it. The PyPI version is pinned to this
// package's own version, so the npm and PyPI releases cannot drift.
"use strict";
const { spawn, spawnSync } = require("node:child_process");
const os = require("node:os");

const VERSION = require("../package.json").version;
const PYPI_SPEC = `bosun-mcp==${VERSION}`;
const args = process.argv.slice(2);
const isWin = process.platform === "win32";
const PY_CHECK = [
  "-P",
  "-c",
  "import importlib.util, sys; sys.exit(0 if sys.version_info >= (3, 11) and importlib.util.find_spec('bosun.server.cli') else 1)",
];

function note(msg) {
  if (process.env.BOSUN_LAUNCHER_QUIET !== "1") process.stderr.write(`[bosun-mcp] ${msg}\n`);
}

function works(cmd, cmdArgs) {
  const r = spawnSync(cmd, cmdArgs, { stdio: "ignore", shell: isWin, timeout: 30000 });
  return r.status === 0;
}

function resolve() {
  const explicit = (process.env.BOSUN_PYTHON || "").trim();
  if (explicit) return [explicit, ["-P", "-m", "bosun", "stdio", ...args], "BOSUN_PYTHON"];
  if (works("uvx", ["--version"])) return ["uvx", ["--from", PYPI_SPEC, "bosun-mcp", ...args], "uvx"];
  for (const py of isWin ? ["py", "python"] : ["python3", "python"]) {
    if (works(py, PY_CHECK)) return [py, ["-P", "-m", "bosun", "stdio", ...args], py];
  }
  return null;
}

const picked = resolve();
if (!picked) {
  process.stderr.write(
    "[bosun-mcp] found neither uvx nor a Python >= 3.11 with bosun installed.\n" +
      "[bosun-mcp] install uv (https://docs.astral.sh/uv/) so this launcher can run " + PYPI_SPEC + ",\n" +
      "[bosun-mcp] or: pipx install " + PYPI_SPEC + "  (or pip install " + PYPI_SPEC + "),\n" +
      "[bosun-mcp] or set BOSUN_PYTHON to a python that has bosun installed.\n",
  );
  process.exit(127);
}

const [cmd, cmdArgs, how] = picked;
note(`${how}: ${cmd} ${cmdArgs.join(" ")}`);
const child = spawn(cmd, cmdArgs, { stdio: "inherit", shell: isWin });
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => {
    if (child.exitCode === null && child.signalCode === null) child.kill(sig);
  });
}
child.on("error", (err) => {
  process.stderr.write(`[bosun-mcp] failed to start ${cmd}: ${err.message}\n`);
  process.exit(127);
});
child.on("exit", (code, signal) => {
  if (signal) {
    const num = os.constants.signals[signal];
    process.exit(num ? 128 + num : 1);
  }
  process.exit(code === null ? 1 : code);
});
