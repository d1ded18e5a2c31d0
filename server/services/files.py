"""FileService: observe(kind="file"), a file the agent read, recorded with its hash; the bytes as a ref.

Only files under ``BOSUN_ROOTS`` are read; the real path is checked against the roots so a
symlink or ``..`` cannot lead outside them.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bosun.core.errors import InvalidInput, NotFound
from bosun.core.offload.offload import answer_tokens, fast_tokens, short_ref
from bosun.core.redact import Redactor
from bosun.server.services.tasks import TaskService

if TYPE_CHECKING:
    from bosun.server.engine import Engine

MEDIA_TEXT = "text/plain; charset=utf-8"


class FileService:
    """Reads files under the configured roots for observe(kind="file")."""

    def __init__(self, engine: Engine, tasks: TaskService, redactor: Redactor) -> None:
        self.engine = engine
        self.tasks = tasks
        self.redactor = redactor

    def _resolve_path(self, path: str) -> Path:
        roots = [Path(os.path.realpath(r)) for r in self.engine.config.roots]
        if not roots:
            raise InvalidInput("path", "no readable roots are configured", "set BOSUN_ROOTS=/path/a:/path/b")
        if not isinstance(path, str) or not path.strip() or "\x00" in path:
            raise InvalidInput("path", "must be a non-empty file path")
        p = Path(path.strip()).expanduser()
        if ".." in p.parts:
            raise InvalidInput("path", "'..' is not allowed (path traversal)", "a path under BOSUN_ROOTS")
        candidates = [p] if p.is_absolute() else [root / p for root in roots]
        for cand in candidates:
            real = Path(os.path.realpath(cand))
            for root in roots:
                if (real == root or root in real.parents) and os.path.lexists(cand):
                    return real
        if any(os.path.lexists(c) for c in candidates):
            raise InvalidInput("path", f"{path} resolves outside BOSUN_ROOTS (symlink or absolute path)",
                               ", ".join(str(r) for r in roots))
        raise NotFound("file", path, f"not found under {', '.join(str(r) for r in roots)}")

    async def observe_file(self, task_id: str, path: str, agent: str | None = None) -> dict[str, Any]:
        """Record a file the agent read: path, sha256 (of the scrubbed bytes), mtime, size; content as a ref."""
        real = self._resolve_path(path)
        try:
            st = os.stat(real)
        except OSError as exc:
            raise NotFound("file", path, str(exc)) from exc
        if not stat.S_ISREG(st.st_mode):
            raise InvalidInput("path", f"{path} is not a regular file")
        limit = self.engine.config.max_file_bytes
        if st.st_size > limit:
            raise InvalidInput("path", f"{path} is {st.st_size} bytes; the limit is {limit} (BOSUN_MAX_FILE_BYTES)")
        state = await self.tasks.get(task_id)
        raw = real.read_bytes()[: limit + 1]
        if len(raw) > limit:
            raise InvalidInput("path", f"{path} grew past the limit of {limit} bytes while being read")
        data, redactions = self.redactor.redact_bytes(raw)
        text = data.decode("utf-8", "replace")
        ref = await self.engine.refs.put(data, MEDIA_TEXT)
        digest = ref.rsplit(":", 1)[1]
        prev = state.files.get(str(real))
        answer: dict[str, Any] = {
            "path": str(real), "sha256": short_ref(digest).rsplit(":", 1)[1], "size": st.st_size,
            "mtime": round(st.st_mtime, 3), "tokens": fast_tokens(text), "ref": short_ref(digest),
            "changed": None if prev is None else prev.get("sha256") != digest,
        }
        if redactions:
            answer["redacted"] = sum(redactions.values())
        payload = {"path": str(real), "sha256": digest, "mtime": st.st_mtime, "size": st.st_size, "ref": ref,
                   "tokens": answer["tokens"], "response_tokens": answer_tokens(answer)}
        state = await self.tasks.append(task_id, "file_read", payload, agent=agent)
        answer["version"] = state.version
        return answer
