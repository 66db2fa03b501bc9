"""The build backend of `pip install ./python` (PEP 517, standard library only).

It builds kaiten's C library with CMake from the repository this folder
sits in (the system cmake and C compiler; scripts/deps.sh installs them and
the libraries kaiten links), copies the shared libraries the Python package
loads into kaiten/_native/, and writes the wheel itself: nothing is
downloaded, so it also installs with `pip install --no-index ./python`.

Config settings (pip's -C / --config-settings):
  build-dir=DIR   keep the CMake build there (incremental rebuilds);
                  default: a temporary folder ($KAITEN_BUILD_DIR also works)
  jobs=N          parallel compile jobs (default: the CPU count)
"""
import ast
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
# pip >= 21.3 builds in place, so the repository is this folder's parent; an
# older pip copies the folder away first: $KAITEN_SOURCE_DIR names it then
REPO = os.environ.get("KAITEN_SOURCE_DIR") or os.path.dirname(HERE)
NAME = "kaiten"
LIBS = ("libkaiten_core.so", "libkaiten_io.so", "libkaiten_report.so", "libkaiten_ffi.so")


def _project():
    """pyproject.toml's [project] table (tomllib; before Python 3.11 a
    reader of the strings, lists and inline tables the table uses)."""
    path = os.path.join(HERE, "pyproject.toml")
    try:
        import tomllib
        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    except ImportError:
        pass
    project, table, key, value = {}, None, None, ""
    with open(path) as f:
        lines = f.read().splitlines()
    for line in lines + ["[end]"]:
        text = line.split(" #", 1)[0].strip()
        if key is not None:  # a list over several lines
            value += text
            if text.endswith("]"):
                table[key] = ast.literal_eval(value)
                key = None
            continue
        if text.startswith("["):
            name = text.strip("[]")
            table = project if name == "project" else \
                project.setdefault("optional-dependencies", {}) \
                if name == "project.optional-dependencies" else None
            continue
        if table is None or "=" not in text:
            continue
        k, v = (x.strip() for x in text.split("=", 1))
        if v.startswith("[") and not v.endswith("]"):
            key, value = k, v
        elif v.startswith("{"):
            table[k] = dict(re.findall(r'(\w+)\s*=\s*"([^"]*)"', v))
        else:
            table[k] = ast.literal_eval(v)
    return project


def _version():
    with open(os.path.join(REPO, "include", "kaiten", "version.h")) as f:
        m = re.search(r'KT_VERSION_STRING\s+"([^"]+)"', f.read())
    if not m:
        raise RuntimeError("kaiten: no KT_VERSION_STRING in include/kaiten/version.h")
    return m.group(1)


def _metadata():
    """The wheel's METADATA, from [project] (core metadata 2.1)."""
    p = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {_version()}",
             f"Summary: {p['description']}", f"Requires-Python: {p['requires-python']}",
             f"License: {p.get('license', {}).get('text', '')}",
             f"Keywords: {','.join(p.get('keywords', []))}"]
    lines += [f"Classifier: {c}" for c in p.get("classifiers", [])]
    for extra, reqs in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    return "\n".join(lines) + "\n"


def _tag():
    return "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _setting(config_settings, key, env=None):
    value = (config_settings or {}).get(key)
    return value if value is not None else (os.environ.get(env) if env else None)


def _run(cmd):
    print("kaiten build:", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode:
        sys.stderr.write(p.stdout[-6000:])
        raise RuntimeError(f"kaiten: `{' '.join(cmd)}` failed (exit {p.returncode}); the C library "
                           "needs cmake, a C compiler, OpenBLAS, cJSON and libmicrohttpd: run "
                           "scripts/deps.sh (Debian) first")


def _build_libraries(config_settings):
    """Builds the shared libraries; returns the folder that holds them."""
    if not os.path.exists(os.path.join(REPO, "CMakeLists.txt")) or \
            not os.path.exists(os.path.join(REPO, "include", "kaiten", "ffi.h")):
        raise RuntimeError("kaiten: build the package from the repository (pip install ./python, "
                           f"pip >= 21.3; or set KAITEN_SOURCE_DIR): {REPO} holds no kaiten sources")
    cmake = shutil.which(os.environ.get("CMAKE", "cmake"))
    if not cmake:
        raise RuntimeError("kaiten: cmake not found: run scripts/deps.sh (Debian: apt-get install "
                           "cmake build-essential ...) and try again")
    build = _setting(config_settings, "build-dir", "KAITEN_BUILD_DIR") or \
        tempfile.mkdtemp(prefix="kaiten-build-")
    jobs = _setting(config_settings, "jobs") or str(os.cpu_count() or 2)
    # $ORIGIN: the libraries find each other in whatever folder they are copied to
    _run([cmake, "-S", REPO, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DKT_EXAMPLES=OFF",
          "-DKT_SHARED=ON", "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON"])
    _run([cmake, "--build", build, "--target", "kaiten_ffi_shared", "-j", jobs])
    return build


def _package_files():
    """(path in the wheel, path here) of every Python file of the package."""
    root = os.path.join(HERE, NAME)
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in ("__pycache__", "_native"))
        for f in sorted(files):
            if f.endswith(".py") or f == "py.typed":
                full = os.path.join(d, f)
                out.append((os.path.relpath(full, HERE).replace(os.sep, "/"), full))
    return out


class _Wheel:
    """A wheel being written: files, then the dist-info with its RECORD."""

    def __init__(self, path):
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.record = []

    def add(self, arcname, data, mode=0o644):
        info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.record.append(f"{arcname},sha256={digest},{len(data)}")

    def close(self, dist_info):
        for name, text in ((f"{dist_info}/METADATA", _metadata()),
                           (f"{dist_info}/WHEEL", "Wheel-Version: 1.0\nGenerator: kaiten\n"
                                                  f"Root-Is-Purelib: false\nTag: {_tag()}\n"),
                           (f"{dist_info}/top_level.txt", NAME + "\n")):
            self.add(name, text.encode())
        self.record.append(f"{dist_info}/RECORD,,")
        self.zip.writestr(f"{dist_info}/RECORD", "\n".join(self.record) + "\n")
        self.zip.close()


def _wheel_name():
    return f"{NAME}-{_version()}-{_tag()}.whl", f"{NAME}-{_version()}.dist-info"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    build = _build_libraries(config_settings)
    name, dist_info = _wheel_name()
    w = _Wheel(os.path.join(wheel_directory, name))
    for arc, full in _package_files():
        with open(full, "rb") as f:
            w.add(arc, f.read())
    for lib in LIBS:
        with open(os.path.join(build, lib), "rb") as f:
            w.add(f"{NAME}/_native/{lib}", f.read(), 0o755)
    w.close(dist_info)
    return name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """An editable install: the libraries are copied into python/kaiten/_native
    and the wheel holds one .pth file naming this folder."""
    build = _build_libraries(config_settings)
    native = os.path.join(HERE, NAME, "_native")
    os.makedirs(native, exist_ok=True)
    for lib in LIBS:
        shutil.copy2(os.path.join(build, lib), os.path.join(native, lib))
    name, dist_info = _wheel_name()
    w = _Wheel(os.path.join(wheel_directory, name))
    w.add(f"_{NAME}_editable.pth", (HERE + "\n").encode())
    w.close(dist_info)
    return name
