"""FileService: observe(kind="file"), a file the agent read, recorded with its hash; the bytes as a ref.

Only files under ``BOSUN_ROOTS`` are read. The file is opened beneath its root's descriptor
(``safe_open``: openat2 RESOLVE_BENEATH, else O_NOFOLLOW per component), then checked and read
through that descriptor, so neither a symlink, ``..``, nor a directory swapped mid-call can lead
outside the roots.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bosun.core.errors import InvalidInput, NotFound
from bosun.core.offload.offload import answer_tokens, fast_tokens, short_ref
from bosun.core.redact import Redactor
from bosun.server.services.safe_open import Escape, open_beneath, read_fd
from bosun.server.services.tasks import TaskService

if TYPE_CHECKING:
    from bosun.server.config import Config
    from bosun.server.services.ports import OpenStores

MEDIA_TEXT = "text/plain; charset=utf-8"


class FileService:
    """Reads files under the configured roots for observe(kind="file")."""

    def __init__(self, config: Config, stores: OpenStores, tasks: TaskService, redactor: Redactor) -> None:
        self.config = config
        self.stores = stores
        self.tasks = tasks
        self.redactor = redactor

    def _locate(self, path: str) -> list[tuple[Path, str]]:
        """(root, path relative to it) pairs to try, checked lexically; nothing is opened yet."""
        roots = [Path(os.path.realpath(r)) for r in self.config.roots]
        if not roots:
            raise InvalidInput("path", "no readable roots are configured", "set BOSUN_ROOTS=/path/a:/path/b")
        if not isinstance(path, str) or not path.strip() or "\x00" in path:
            raise InvalidInput("path", "must be a non-empty file path")
        p = Path(path.strip()).expanduser()
        if ".." in p.parts:
            raise InvalidInput("path", "'..' is not allowed (path traversal)", "a path under BOSUN_ROOTS")
        if not p.is_absolute():
            return [(root, str(p)) for root in roots]
        given = [Path(os.path.abspath(r)) for r in self.config.roots]
        found = [(root, str(p.relative_to(base))) for root, alias in zip(roots, given, strict=True)
                 for base in dict.fromkeys((root, alias)) if p != base and p.is_relative_to(base)]
        if not found:
            raise InvalidInput("path", f"{path} resolves outside BOSUN_ROOTS (an absolute path under no root)", ", ".join(str(r) for r in roots))
        return list(dict.fromkeys(found))

    def _open(self, path: str) -> tuple[int, Path]:
        """A descriptor of the file, opened beneath its root (race-free), and its real path."""
        places = self._locate(path)
        escaped = False
        for root, rel in places:
            try:
                fd = open_beneath(str(root), rel)
            except Escape:
                escaped = True
                continue
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise InvalidInput("path", f"{path} cannot be opened: {exc.strerror or 'error'}") from exc
            try:
                real = Path(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                real = root / rel
            return fd, real
        roots = ", ".join(str(r) for r, _ in places)
        if escaped:
            raise InvalidInput("path", f"{path} resolves outside BOSUN_ROOTS (symlink or absolute path)", roots)
        raise NotFound("file", path, f"not found under {roots}", field="path")

    def _read_scrubbed(self, path: str) -> tuple[Path, os.stat_result, bytes, dict[str, int], int]:
        """The file's real path, stat, scrubbed bytes, redaction counts and token count (blocking)."""
        fd, real = self._open(path)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise InvalidInput("path", f"{path} is not a regular file")
            limit = self.config.max_file_bytes
            if st.st_size > limit:
                raise InvalidInput("path", f"{path} is {st.st_size} bytes; the limit is {limit} (BOSUN_MAX_FILE_BYTES)")
            try:
                raw = read_fd(fd, limit)
            except OSError as exc:
                raise InvalidInput("path", f"{path} could not be read: {exc.strerror or 'error'}") from exc
        finally:
            os.close(fd)
        if len(raw) > limit:
            raise InvalidInput("path", f"{path} grew past the limit of {limit} bytes while being read")
        data, redactions = self.redactor.redact_bytes(raw)
        return real, st, data, dict(redactions), fast_tokens(data.decode("utf-8", "replace"))

    async def observe_file(self, task_id: str, path: str, agent: str | None = None) -> dict[str, Any]:
        """Record a file the agent read: path, sha256 (of the scrubbed bytes), mtime, size; content as a ref.

        Checked and read through one descriptor opened beneath the root: what is checked is what is read."""
        state = await self.tasks.get(task_id)
        # open, read, scrub and count off the event loop: an 8 MB file must not stall every other agent
        real, st, data, redactions, tokens = await asyncio.to_thread(self._read_scrubbed, path)
        ref = await self.stores.refs.put(data, MEDIA_TEXT)
        digest = ref.rsplit(":", 1)[1]
        prev = state.files.get(str(real))
        answer: dict[str, Any] = {
            "path": str(real), "sha256": short_ref(digest).rsplit(":", 1)[1], "size": st.st_size,
            "mtime": round(st.st_mtime, 3), "tokens": tokens, "ref": short_ref(digest),
            "changed": None if prev is None else prev.get("sha256") != digest,
        }
        if redactions:
            answer["redacted"] = sum(redactions.values())
        payload = {"path": str(real), "sha256": digest, "mtime": st.st_mtime, "size": st.st_size, "ref": ref,
                   "tokens": answer["tokens"], "response_tokens": answer_tokens(answer)}
        state = await self.tasks.append(task_id, "file_read", payload, agent=agent)
        answer["version"] = state.version
        return answer
