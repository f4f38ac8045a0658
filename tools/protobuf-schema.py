#!/usr/bin/env python3
"""Generates the protobuf schema crate's table (crates/protobuf-schema/src/generated.rs)
from Kubernetes' own sources: the `generated.proto` files give each message's fields and
numbers, the Go types beside them give what JSON makes of each field (its name, `omitempty`,
whether it is a pointer, whether it is inlined). The decoder presents protobuf messages to
serde as the JSON objects k8s-openapi's types expect, so it needs both.

Usage: tools/protobuf-schema.py REVISION API_DIR APIMACHINERY_DIR [API_DIR APIMACHINERY_DIR ...]
  REVISION          what the checkouts are (written in the header)
  API_DIR           a checkout of k8s.io/api (github.com/kubernetes/api)
  APIMACHINERY_DIR  a checkout of k8s.io/apimachinery, of the same release
Several releases, oldest first, give one schema that reads all of them: a later release adds
its fields and kinds, and wins where an alpha field changed.
"""

import os
import re
import sys

SCALARS = {
    "string": "Str", "bytes": "Bytes", "bool": "Bool", "int32": "Int32", "int64": "Int64",
    "uint32": "Uint32", "uint64": "Uint64", "double": "Double", "float": "Float",
}

# Messages whose JSON is not an object of their fields.
SPECIAL = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": "Time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": "MicroTime",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "Quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "IntOrString",
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "RawJson",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": "RawJson",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration": "Duration",
}

FIELD_RE = re.compile(r"^\s*(optional|repeated|required)\s+([\w.]+)\s+(\w+)\s*=\s*(\d+)")
MAP_RE = re.compile(r"^\s*map<\s*([\w.]+)\s*,\s*([\w.]+)\s*>\s+(\w+)\s*=\s*(\d+)")


def parse_proto(path):
    package, messages, current = None, {}, None
    with open(path) as f:
        for line in f:
            line = line.split("//")[0]
            m = re.match(r"^package\s+([\w.]+);", line)
            if m:
                package = m.group(1)
                continue
            m = re.match(r"^message\s+(\w+)\s*{", line)
            if m:
                current = []
                messages[m.group(1)] = current
                continue
            if current is None:
                continue
            m = MAP_RE.match(line)
            if m:
                current.append(("map", m.group(2), m.group(3), int(m.group(4)), m.group(1)))
                continue
            m = FIELD_RE.match(line)
            if m:
                current.append((m.group(1), m.group(2), m.group(3), int(m.group(4)), None))
                continue
            if line.strip() == "}":
                current = None
    return package, messages


def go_field(line):
    """(name or None when embedded, type, tags) of a struct field line with tags."""
    if "`" not in line:
        return None
    head, tags = line.split("`", 1)
    tokens = head.split()
    if len(tokens) == 1:
        return None, tokens[0], tags.rstrip().rstrip("`")
    if len(tokens) == 2:
        return tokens[0], tokens[1], tags.rstrip().rstrip("`")
    return None


def parse_go(dir_path):
    """(struct, field number) -> (json name, omitempty, pointer, inline); named slices."""
    fields, slices = {}, set()
    for name in sorted(os.listdir(dir_path)):
        if not name.endswith(".go") or name.endswith("_test.go") or name.startswith("zz_") \
                or name in ("generated.pb.go",) or "swagger" in name:
            continue
        struct = None
        with open(os.path.join(dir_path, name)) as f:
            for line in f:
                m = re.match(r"^type\s+(\w+)\s+struct\s*{", line)
                if m:
                    struct = m.group(1)
                    continue
                m = re.match(r"^type\s+(\w+)\s+\[\]", line)
                if m:
                    slices.add(m.group(1))
                    continue
                if struct is None:
                    continue
                if line.startswith("}"):
                    struct = None
                    continue
                parsed = go_field(line.split("//")[0] if "`" not in line.split("//")[0] else line)
                if not parsed:
                    continue
                go_name, go_type, tags = parsed
                proto = re.search(r'protobuf:"([^"]*)"', tags)
                js = re.search(r'json:"([^"]*)"', tags)
                if not proto:
                    continue
                parts = proto.group(1).split(",")
                if len(parts) < 2 or not parts[1].isdigit():
                    continue
                number = int(parts[1])
                pname = next((p[5:] for p in parts if p.startswith("name=")), None)
                json_parts = js.group(1).split(",") if js else [go_name or ""]
                json_name = json_parts[0]
                inline = "inline" in json_parts[1:] or (go_name is None and json_name == "")
                omitempty = "omitempty" in json_parts[1:]
                pointer = go_type.startswith("*")
                fields[(struct, number)] = (json_name or pname, omitempty, pointer, inline)
    return fields, slices


def group_of(dir_path):
    register = os.path.join(dir_path, "register.go")
    if os.path.exists(register):
        with open(register) as f:
            m = re.search(r'GroupName\s*=\s*"([^"]*)"', f.read())
            if m:
                return m.group(1)
    return None


def main():
    revision, trees = sys.argv[1], sys.argv[2:]
    if not trees or len(trees) % 2:
        raise SystemExit(__doc__)
    messages = {}   # fq name -> [package, name, {number: field}, is named slice]
    kinds = set()   # (apiVersion, kind, fq name)
    # Oldest tree first: a later one adds its fields and kinds, and wins where a field
    # changed (alpha fields do change between releases; numbers of GA fields never).
    for api, machinery in zip(trees[::2], trees[1::2]):
        roots = []
        for base, prefix in ((api, "k8s.io/api"), (machinery, "k8s.io/apimachinery")):
            for dirpath, _, files in os.walk(base):
                if "generated.proto" in files and "testapigroup" not in dirpath:
                    roots.append((dirpath, prefix + dirpath[len(base):]))
        for dirpath, go_path in sorted(roots):
            package, msgs = parse_proto(os.path.join(dirpath, "generated.proto"))
            go_fields, slices = parse_go(dirpath)
            group = group_of(dirpath)
            version = os.path.basename(dirpath)
            if go_path == "k8s.io/apimachinery/pkg/apis/meta/v1":
                group = "meta.k8s.io"
            for name, fields in msgs.items():
                fq = package + "." + name
                entry = messages.setdefault(fq, [package, name, {}, False])
                entry[3] = name in slices
                for label, ty, pname, number, key in fields:
                    json_name, omitempty, pointer, inline = go_fields.get(
                        (name, number), (pname, False, False, False))
                    field = (label, ty, json_name or pname, key, omitempty, pointer, inline)
                    earlier = entry[2].get(number)
                    if earlier is not None and earlier[:3] != field[:3]:
                        print(f"{fq} field {number}: {earlier[:3]} became {field[:3]} in {api}",
                              file=sys.stderr)
                    entry[2][number] = field
                if group is not None:
                    api_version = f"{group}/{version}" if group else version
                    kinds.add((api_version, name, fq))
    order = sorted(messages)
    index = {fq: i for i, fq in enumerate(order)}

    def resolve(package, ty):
        if ty in SCALARS:
            return f"Ty::{SCALARS[ty]}"
        ty = ty.lstrip(".")
        fq = ty if ty in messages else package + "." + ty
        if fq not in messages:
            raise SystemExit(f"unknown type {ty} in {package}")
        return f"Ty::Message({index[fq]})"

    out = ["use crate::{Field, Message, Rep, Shape, Ty};\n"]
    out.append(f"/// Every message of the built-in API groups ({len(order)}), sorted by full name.")
    out.append("pub(crate) static MESSAGES: &[Message] = &[")
    for fq in order:
        package, name, fields, is_slice = messages[fq]
        shape = SPECIAL.get(fq, "List" if is_slice else "Object")
        entries = []
        for number in sorted(fields):
            label, ty, json_name, key, omitempty, pointer, inline = fields[number]
            if label == "map":
                if key != "string":
                    raise SystemExit(f"map key {key} in {fq}")
                rep = "Rep::Map"
            elif label == "repeated":
                rep = "Rep::Repeated"
            else:
                rep = "Rep::Single"
            scalar = ty in SCALARS
            omit_zero = scalar and label not in ("repeated", "map") and omitempty and not pointer
            entries.append(f"Field {{ number: {number}, json: {json_name!r}, ty: {resolve(package, ty)}, "
                           f"rep: {rep}, omit_zero: {str(omit_zero).lower()}, inline: {str(inline).lower()} }}")
        body = ", ".join(entries)
        # Field number -> 1 + its index in `fields` (0: none), for numbers below 64.
        numbers = sorted(fields)
        lookup = [0] * (min(max(numbers, default=0), 63) + 1)
        for i, number in enumerate(numbers):
            if number < 64:
                lookup[number] = i + 1
        table = ", ".join(str(v) for v in lookup)
        out.append(f"    Message {{ name: {fq!r}, shape: Shape::{shape}, fields: &[{body}], by_number: &[{table}] }},")
    out.append("];\n")
    kinds = sorted(kinds)
    out.append("/// `(apiVersion, kind)` of every message of an API group, sorted, to its message.")
    out.append("pub(crate) static KINDS: &[(&str, &str, u16)] = &[")
    for api_version, kind, fq in kinds:
        out.append(f"    ({api_version!r}, {kind!r}, {index[fq]}),")
    out.append("];")
    text = "\n".join(out) + "\n"
    # Rust string literals: Python's repr uses single quotes.
    text = re.sub(r"'([^'\\]*)'", lambda m: '"' + m.group(1) + '"', text)
    header = ("// Generated by tools/protobuf-schema.py from k8s.io/api and k8s.io/apimachinery\n"
              f"// ({revision}).\n// Do not edit: run the tool again.\n\n")
    sys.stdout.write(header + text)


main()
