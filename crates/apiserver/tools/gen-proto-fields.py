#!/usr/bin/env python3
"""Regenerates crates/apiserver/src/protobuf/fields.rs: the protobuf field numbers and
wire types of the messages our protobuf codec speaks, read from the k8s-pb crate's
prost-generated sources (k8s-pb is Kubernetes' generated.proto compiled by prost).

Usage: gen-proto-fields.py PATH/TO/k8s-pb-X.Y.Z/src > crates/apiserver/src/protobuf/fields.rs

Only messages reachable from ROOTS are emitted. JSON names are attached at run time
from the OpenAPI schemas (prost field names are the snake_case of the proto names).
"""
import os
import re
import sys

SRC = sys.argv[1]

# Served kinds (and their lists) plus the meta/runtime messages the wire needs.
ROOTS = [
    "io.k8s.apimachinery.pkg.runtime.Unknown",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
    "io.k8s.apimachinery.pkg.apis.meta.v1.PartialObjectMetadata",
    "io.k8s.apimachinery.pkg.apis.meta.v1.PartialObjectMetadataList",
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "io.k8s.api.core.v1.Binding",
]
KINDS = """core.v1 Namespace Node Pod Event Service Endpoints ReplicationController PersistentVolume
core.v1 PersistentVolumeClaim ConfigMap Secret ServiceAccount LimitRange ResourceQuota PodTemplate
events.v1 Event
coordination.v1 Lease
policy.v1 PodDisruptionBudget Eviction
storage.v1 StorageClass CSINode CSIDriver CSIStorageCapacity VolumeAttachment VolumeAttributesClass
apps.v1 Deployment ReplicaSet StatefulSet DaemonSet ControllerRevision
batch.v1 Job CronJob
scheduling.v1 PriorityClass
resource.v1 ResourceClaim ResourceClaimTemplate ResourceSlice DeviceClass
discovery.v1 EndpointSlice
authentication.v1 TokenReview SelfSubjectReview
authorization.v1 SubjectAccessReview SelfSubjectAccessReview"""
for line in KINDS.splitlines():
    gv, *kinds = line.split()
    for k in kinds:
        ROOTS.append(f"io.k8s.api.{gv}.{k}")
        if k not in ("Eviction", "TokenReview", "SelfSubjectReview", "SubjectAccessReview", "SelfSubjectAccessReview"):
            ROOTS.append(f"io.k8s.api.{gv}.{k}List")

SCALARS = {"string", "bytes", "int32", "int64", "uint32", "uint64", "bool", "double", "float"}

messages = {}
for root, _, files in os.walk(SRC):
    for f in files:
        if not f.endswith(".rs"):
            continue
        path = os.path.join(root, f)
        rel = os.path.relpath(path, SRC)
        mod = rel[:-3].split(os.sep)
        if mod[-1] in ("mod", "lib"):
            mod = mod[:-1]
        text = open(path).read()
        for m in re.finditer(r"::prost::Message\)\]\s*pub struct (\w+) \{(.*?)\n\}", text, re.S):
            name, body = m.group(1), m.group(2)
            fields = []
            for fm in re.finditer(r"#\[prost\(([^\]]*)\)\]\s*pub (r#)?(\w+):\s*([^;]*?),\s*(?=\n\s*(///|#\[|$|\}))", body + "\n", re.S):
                attr, fname, ty = fm.group(1), fm.group(3), " ".join(fm.group(4).split())
                tag = int(re.search(r'tag = "(\d+)"', attr).group(1))
                mm = re.match(r'(btree_map|map|hash_map) = "string, (\w+)"', attr)
                if mm:
                    kind, label = "map:" + mm.group(2), "map"
                else:
                    kind = attr.split(",")[0].strip()
                    if kind.startswith("bytes"):
                        kind = "bytes"
                    label = "repeated" if "repeated" in attr else "optional"
                target = ""
                if kind in ("message", "map:message"):
                    inner = re.findall(r"([\w:]+)\s*>*\s*$", ty.replace(">", " > "))
                    cand = re.sub(r"[<>]", " ", ty).split()
                    cand = [c.strip(",") for c in cand if c not in ("::core::option::Option", "::prost::alloc::vec::Vec", "::prost::alloc::collections::BTreeMap", "::prost::alloc::string::String", "String")]
                    t = cand[-1]
                    parts = t.split("::")
                    base = list(mod)
                    while parts and parts[0] == "super":
                        base.pop()
                        parts.pop(0)
                    if len(parts) == 1:
                        full = base + parts
                    else:
                        full = base + parts if parts[0] not in ("crate",) else parts[1:]
                    if parts and parts[0] in ("api", "apimachinery", "apiextensions_apiserver", "kube_aggregator", "metrics") and len(base) == 0:
                        full = parts
                    target = "io.k8s." + ".".join(full)
                fields.append((fname, tag, kind, label, target))
            messages["io.k8s." + ".".join(mod + [name])] = fields

seen, todo = set(), [r for r in ROOTS if r in messages]
missing = [r for r in ROOTS if r not in messages]
while todo:
    n = todo.pop()
    if n in seen:
        continue
    seen.add(n)
    for (_, _, kind, _, target) in messages[n]:
        if target and target not in seen:
            if target in messages:
                todo.append(target)
            else:
                missing.append(target)

KIND = {"string": "Str", "bytes": "Bytes", "int32": "I32", "int64": "I64", "uint32": "I64", "uint64": "I64",
        "bool": "Bool", "double": "F64", "float": "F32", "message": "Msg"}
print("//! Generated by `crates/apiserver/tools/gen-proto-fields.py` from the k8s-pb crate's sources: DO NOT EDIT.")
print("//! Field numbers and wire types of the protobuf messages the codec speaks.")
print()
print("use super::schema::{Kind::*, Label::*, ProtoField as F};")
print()
print("/// `(message, fields)`, sorted by message name.")
print("pub(super) static MESSAGES: &[(&str, &[F])] = &[")
for n in sorted(seen):
    print(f'    ("{n}", &[')
    for (fname, tag, kind, label, target) in messages[n]:
        if kind.startswith("map:"):
            v = kind[4:]
            k = f"Map(&{KIND[v]})"
        else:
            k = KIND[kind]
        lab = {"optional": "Opt", "repeated": "Rep", "map": "Opt"}[label]
        print(f'        F("{fname}", {tag}, {k}, {lab}, "{target}"),')
    print("    ]),")
print("];")
for m in sorted(set(missing)):
    print(f"missing: {m}", file=sys.stderr)
