#!/usr/bin/env python3
"""Checks META.json against the PGXN Meta Spec 1.0.0 and against the tree.

    test/package/check_meta.py [ROOT]     prints each problem; exit 1 if any

Debian has no PGXN::Meta::Validator (the Perl module PGXN itself uses) and
pgxnclient reads only the keys it needs, so this script checks the rules of
the spec (https://pgxn.org/spec/) itself: the required keys, the form of
every key it defines (terms, semantic versions, licenses, prereqs and their
version ranges, provides, resources, tags, no_index, release_status,
meta-spec) and that nothing else appears but x_ keys. It also checks what
PGXN cannot know: the version is hilo.control's default_version (and so is
the upstream version of debian/changelog's latest entry), and every file
that provides names exists.
"""

import json
import os
import re
import sys

SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
    r"(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
RANGE_PART = re.compile(r"^(?:(==|!=|<=|>=|<|>)\s*)?(.+)$")
LICENSES = {
    "agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd",
    "freebsd", "gfdl_1_2", "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1",
    "lgpl_3_0", "mit", "mozilla_1_0", "mozilla_1_1", "openssl", "perl_5",
    "postgresql", "qpl_1_0", "ssleay", "sun", "zlib", "open_source",
    "restricted", "unrestricted", "unknown",
}
TOP_KEYS = {
    "name", "version", "abstract", "maintainer", "license", "provides",
    "meta-spec", "description", "generated_by", "tags", "no_index",
    "prereqs", "release_status", "resources",
}
REQUIRED = ["name", "version", "abstract", "maintainer", "license",
            "provides", "meta-spec"]
PHASES = {"configure", "build", "test", "runtime", "develop"}
RELATIONS = {"requires", "recommends", "suggests", "conflicts"}

problems = []


def bad(path, message):
    problems.append(f"{path}: {message}")


def is_custom(key):
    return isinstance(key, str) and re.match(r"^[xX]_.", key) is not None


def only_keys(obj, allowed, path):
    for key in obj:
        if key not in allowed and not is_custom(key):
            bad(path, f"unknown key {key!r}")


def check_string(value, path):
    if not isinstance(value, str) or not value.strip():
        bad(path, "must be a non-empty string")
        return False
    return True


def check_term(value, path):
    if not isinstance(value, str) or len(value) < 2 or \
            re.search(r"[/\\\s\x00-\x1f\x7f]", value):
        bad(path, f"{value!r} is not a term (2+ characters, no slash, "
                  "backslash, space or control character)")


def check_semver(value, path):
    if not isinstance(value, str) or not SEMVER.match(value):
        bad(path, f"{value!r} is not a semantic version")


def check_uri(value, path):
    if not isinstance(value, str) or not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:\S+$", value):
        bad(path, f"{value!r} is not a URI")


def check_range(value, path):
    if value == 0 or value == "0":
        return
    if not isinstance(value, str):
        bad(path, f"{value!r} is not a version range")
        return
    for part in value.split(","):
        m = RANGE_PART.match(part.strip())
        if not m or not SEMVER.match(m.group(2).strip()):
            bad(path, f"{value!r} is not a version range ({part.strip()!r})")


def check_list_of_strings(value, path, term=False):
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        bad(path, "must be a string or a non-empty list of strings")
        return
    for i, item in enumerate(value):
        if term:
            check_term(item, f"{path}[{i}]")
        else:
            check_string(item, f"{path}[{i}]")


def check_license(value):
    if isinstance(value, str):
        if value not in LICENSES:
            bad("license", f"{value!r} is not a license the spec names")
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            if item not in LICENSES:
                bad(f"license[{i}]", f"{item!r} is not a license the spec names")
    elif isinstance(value, dict) and value:
        for name, uri in value.items():
            check_uri(uri, f"license.{name}")
    else:
        bad("license", "must be a license name, a list of them, or an object of URIs")


def check_provides(value, root):
    if not isinstance(value, dict) or not value:
        bad("provides", "must be a non-empty object")
        return
    for ext, data in value.items():
        path = f"provides.{ext}"
        check_term(ext, path)
        if not isinstance(data, dict):
            bad(path, "must be an object")
            continue
        only_keys(data, {"file", "version", "abstract", "docfile"}, path)
        for key in ("file", "version"):
            if key not in data:
                bad(path, f"lacks {key!r}")
        if "version" in data:
            check_semver(data["version"], f"{path}.version")
        for key in ("file", "docfile"):
            if key in data and check_string(data[key], f"{path}.{key}"):
                if not os.path.isfile(os.path.join(root, data[key])):
                    bad(f"{path}.{key}", f"{data[key]!r} is not a file of the tree")
        if "abstract" in data:
            check_string(data["abstract"], f"{path}.abstract")


def check_prereqs(value):
    if not isinstance(value, dict) or not value:
        bad("prereqs", "must be a non-empty object")
        return
    only_keys(value, PHASES, "prereqs")
    for phase, relations in value.items():
        if is_custom(phase):
            continue
        path = f"prereqs.{phase}"
        if not isinstance(relations, dict) or not relations:
            bad(path, "must be a non-empty object")
            continue
        only_keys(relations, RELATIONS, path)
        for relation, deps in relations.items():
            if is_custom(relation):
                continue
            if not isinstance(deps, dict) or not deps:
                bad(f"{path}.{relation}", "must be a non-empty object")
                continue
            for name, rng in deps.items():
                check_term(name, f"{path}.{relation}")
                check_range(rng, f"{path}.{relation}.{name}")


def check_resources(value):
    if not isinstance(value, dict) or not value:
        bad("resources", "must be a non-empty object")
        return
    only_keys(value, {"homepage", "bugtracker", "repository"}, "resources")
    if "homepage" in value:
        check_uri(value["homepage"], "resources.homepage")
    tracker = value.get("bugtracker")
    if tracker is not None:
        if not isinstance(tracker, dict) or not ({"web", "mailto"} & set(tracker)):
            bad("resources.bugtracker", "must be an object with web or mailto")
        else:
            only_keys(tracker, {"web", "mailto"}, "resources.bugtracker")
            if "web" in tracker:
                check_uri(tracker["web"], "resources.bugtracker.web")
            if "mailto" in tracker and not re.match(r"^[^@\s]+@[^@\s]+\.[^@\s]+$",
                                                    str(tracker["mailto"])):
                bad("resources.bugtracker.mailto", "is not an email address")
    repo = value.get("repository")
    if repo is not None:
        if not isinstance(repo, dict) or not ("web" in repo or
                                              ("url" in repo and "type" in repo)):
            bad("resources.repository", "must have web, or url and type")
        else:
            only_keys(repo, {"url", "web", "type"}, "resources.repository")
            for key in ("url", "web"):
                if key in repo:
                    check_uri(repo[key], f"resources.repository.{key}")
            if "type" in repo and (not isinstance(repo["type"], str) or
                                   repo["type"] != repo["type"].lower()):
                bad("resources.repository.type", "must be a lowercase string")


def check_no_index(value):
    if not isinstance(value, dict) or not value:
        bad("no_index", "must be a non-empty object")
        return
    only_keys(value, {"file", "directory"}, "no_index")
    for key in ("file", "directory"):
        if key in value:
            check_list_of_strings(value[key], f"no_index.{key}")


def control_version(root):
    with open(os.path.join(root, "hilo.control")) as f:
        for line in f:
            m = re.match(r"^\s*default_version\s*=\s*'([^']*)'", line)
            if m:
                return m.group(1)
    return None


def debian_version(root):
    """The upstream part of debian/changelog's latest version ("0.5.0" of
    "hilo (1:0.5.0-1) ..."), or None without a changelog."""
    try:
        with open(os.path.join(root, "debian", "changelog")) as f:
            first = f.readline()
    except OSError:
        return None
    m = re.match(r"^\S+ \((?:\d+:)?([^)\s]+?)(?:-[^-)\s]+)?\)", first)
    return m.group(1) if m else first.strip()


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    try:
        with open(os.path.join(root, "META.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        print(f"META.json: {e}")
        return 1
    if not isinstance(meta, dict):
        print("META.json: not a JSON object")
        return 1

    for key in REQUIRED:
        if key not in meta:
            bad("META.json", f"lacks the required key {key!r}")
    only_keys(meta, TOP_KEYS, "META.json")
    if "name" in meta:
        check_term(meta["name"], "name")
    if "version" in meta:
        check_semver(meta["version"], "version")
    for key in ("abstract", "description", "generated_by"):
        if key in meta:
            check_string(meta[key], key)
    if "maintainer" in meta:
        check_list_of_strings(meta["maintainer"], "maintainer")
    if "license" in meta:
        check_license(meta["license"])
    if "provides" in meta:
        check_provides(meta["provides"], root)
    spec = meta.get("meta-spec")
    if spec is not None:
        if not isinstance(spec, dict) or not re.match(r"^1\.0\.\d+$", str(spec.get("version"))):
            bad("meta-spec", "must be an object whose version is 1.0.x")
        else:
            only_keys(spec, {"version", "url"}, "meta-spec")
            if "url" in spec:
                check_uri(spec["url"], "meta-spec.url")
    if "prereqs" in meta:
        check_prereqs(meta["prereqs"])
    if "release_status" in meta and meta["release_status"] not in ("stable", "testing", "unstable"):
        bad("release_status", f"{meta['release_status']!r} is not stable, testing or unstable")
    if "resources" in meta:
        check_resources(meta["resources"])
    if "tags" in meta:
        tags = meta["tags"]
        if not isinstance(tags, list) or not tags:
            bad("tags", "must be a non-empty list")
        else:
            for i, tag in enumerate(tags):
                if not isinstance(tag, str) or not 1 <= len(tag) <= 255 or \
                        re.search(r"[/\\\x00-\x1f\x7f]", tag):
                    bad(f"tags[{i}]", f"{tag!r} is not a tag")
    if "no_index" in meta:
        check_no_index(meta["no_index"])

    # What PGXN cannot check: the tree's own version and files.
    want = control_version(root)
    if meta.get("version") != want:
        bad("version", f"{meta.get('version')!r} is not hilo.control's default_version {want!r}")
    debian = debian_version(root)
    if debian is not None and debian != want:
        bad("debian/changelog", f"upstream version {debian!r} is not hilo.control's default_version {want!r}")
    provided = meta.get("provides", {}).get("hilo") if isinstance(meta.get("provides"), dict) else None
    if not isinstance(provided, dict):
        bad("provides", "does not provide the extension hilo")
    elif provided.get("version") != want:
        bad("provides.hilo.version",
            f"{provided.get('version')!r} is not hilo.control's default_version {want!r}")

    for p in problems:
        print(p)
    if problems:
        print(f"META.json: {len(problems)} problem(s)")
        return 1
    print(f"META.json: valid PGXN Meta Spec 1.0.0, version {meta['version']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
