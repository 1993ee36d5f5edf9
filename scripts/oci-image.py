#!/usr/bin/env python3
"""Writes cordon's container image as an OCI image layout, without a daemon
and reproducibly: the same inputs give the same bytes, whoever builds it
when (every file's time is 0, owners and modes fixed, entries sorted, gzip
without a name or time).

    oci-image.py BINARY LAUNCHER BASH CA_CERTS ARCH VERSION OUT

The image holds only what a confined command and cordon need: cordon (a
static binary) with cordon-launcher beside it, a static bash (the default policy runs bash; its builtins
are the shell), the CA certificates (registry pulls), /etc/passwd and
/etc/group naming the unprivileged user it runs as (65532), and the empty
directories it writes (/workspace, its home, /tmp, /run/cordon). Two
manifests share that one layer: tag VERSION runs `cordon serve --listen
unix:/run/cordon/cordon.sock`, tag VERSION-mcp `cordon mcp --listen
unix:/run/cordon/mcp.sock`; the entrypoint is cordon either way, so any
other subcommand runs with `podman run IMAGE doctor`.
"""

import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

USER = 65532


def entry(name, kind, mode, uid=0, data=b"", target=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.uid = info.gid = uid
    info.uname = info.gname = ""
    info.mtime = 0
    if kind == tarfile.SYMTYPE:
        info.linkname = target
    if kind == tarfile.REGTYPE:
        info.size = len(data)
    return info, data


def layer(binary, launcher, bash, certs):
    read = lambda path: open(path, "rb").read()  # noqa: E731
    passwd = f"root:x:0:0:root:/root:/bin/bash\ncordon:x:{USER}:{USER}:cordon:/home/cordon:/bin/bash\n"
    group = f"root:x:0:\ncordon:x:{USER}:\n"
    entries = [
        entry("bin", tarfile.DIRTYPE, 0o755),
        entry("bin/bash", tarfile.REGTYPE, 0o755, data=read(bash)),
        entry("bin/sh", tarfile.SYMTYPE, 0o777, target="bash"),
        entry("etc", tarfile.DIRTYPE, 0o755),
        entry("etc/group", tarfile.REGTYPE, 0o644, data=group.encode()),
        entry("etc/passwd", tarfile.REGTYPE, 0o644, data=passwd.encode()),
        entry("etc/ssl", tarfile.DIRTYPE, 0o755),
        entry("etc/ssl/certs", tarfile.DIRTYPE, 0o755),
        entry("etc/ssl/certs/ca-certificates.crt", tarfile.REGTYPE, 0o644, data=read(certs)),
        entry("home", tarfile.DIRTYPE, 0o755),
        entry("home/cordon", tarfile.DIRTYPE, 0o700, uid=USER),
        entry("run", tarfile.DIRTYPE, 0o755),
        entry("run/cordon", tarfile.DIRTYPE, 0o755, uid=USER),
        entry("tmp", tarfile.DIRTYPE, 0o1777),
        entry("usr", tarfile.DIRTYPE, 0o755),
        entry("usr/local", tarfile.DIRTYPE, 0o755),
        entry("usr/local/bin", tarfile.DIRTYPE, 0o755),
        entry("usr/local/bin/cordon", tarfile.REGTYPE, 0o755, data=read(binary)),
        entry("usr/local/bin/cordon-launcher", tarfile.REGTYPE, 0o755, data=read(launcher)),
        entry("workspace", tarfile.DIRTYPE, 0o755, uid=USER),
    ]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for info, data in sorted(entries, key=lambda e: e[0].name):
            tar.addfile(info, io.BytesIO(data) if data else None)
    plain = raw.getvalue()
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=9) as gz:
        gz.write(plain)
    return plain, packed.getvalue()


def blob(out, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    path = os.path.join(out, "blobs", "sha256", digest[7:])
    with open(path, "wb") as f:
        f.write(data)
    return digest


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def main(binary, launcher, bash, certs, arch, version, out):
    os.makedirs(os.path.join(out, "blobs", "sha256"), exist_ok=True)
    plain, packed = layer(binary, launcher, bash, certs)
    diff_id = "sha256:" + hashlib.sha256(plain).hexdigest()
    layer_descriptor = {
        "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
        "digest": blob(out, packed),
        "size": len(packed),
    }
    manifests = []
    for tag, command in [
        (version, ["serve", "--listen", "unix:/run/cordon/cordon.sock"]),
        (f"{version}-mcp", ["mcp", "--listen", "unix:/run/cordon/mcp.sock"]),
    ]:
        config = canonical({
            "created": "1970-01-01T00:00:00Z",
            "architecture": arch,
            "os": "linux",
            "config": {
                "User": f"{USER}:{USER}",
                "Env": [
                    "PATH=/usr/local/bin:/bin",
                    "HOME=/home/cordon",
                    "XDG_CACHE_HOME=/home/cordon/.cache",
                    "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
                ],
                "Entrypoint": ["/usr/local/bin/cordon"],
                "Cmd": command,
                "WorkingDir": "/workspace",
                "Volumes": {"/workspace": {}, "/home/cordon": {}, "/run/cordon": {}},
                "Labels": {
                    "org.opencontainers.image.title": "cordon",
                    "org.opencontainers.image.version": version,
                    "org.opencontainers.image.licenses": "Apache-2.0",
                },
            },
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        })
        manifest = canonical({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": blob(out, config),
                "size": len(config),
            },
            "layers": [layer_descriptor],
        })
        manifests.append({
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": blob(out, manifest),
            "size": len(manifest),
            "platform": {"architecture": arch, "os": "linux"},
            "annotations": {"org.opencontainers.image.ref.name": tag},
        })
    with open(os.path.join(out, "oci-layout"), "wb") as f:
        f.write(canonical({"imageLayoutVersion": "1.0.0"}))
    with open(os.path.join(out, "index.json"), "wb") as f:
        f.write(canonical({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                           "manifests": manifests}))
    for m in manifests:
        print(m["annotations"]["org.opencontainers.image.ref.name"], m["digest"])


if __name__ == "__main__":
    if len(sys.argv) != 8:
        sys.exit(__doc__)
    main(*sys.argv[1:])
