# Sourced by scripts/test.sh: its stage "package", with the helpers it uses
# (pass, fail, log, the server helpers of scripts/lib.sh).

# The Debian package postgresql-15-hilo (debian/), built from a copy of the
# tree so the checkout stays clean, then tested as a user would have it:
# META.json against the PGXN Meta Spec (test/package/check_meta.py) and the
# versions of META.json, debian/changelog and hilo.control agreeing;
# dpkg-buildpackage -us -uc -b -jN (its build runs the suites too); lintian (an
# error fails, warnings are listed); apt-get install ./...deb into the
# system's PostgreSQL; make installcheck against a throwaway cluster of the
# system's PostgreSQL, first without hilo preloaded (it must refuse with its
# message), then, through pgxn check, with it (the regression and isolation
# suites against the installed files); pgxn load and unload from META.json;
# the package's autopkgtest on this host (-- null); and last the package is
# purged and any hilo files it replaced (a make install) are put back, so
# the machine is left as found. It installs into the system, so it runs
# last of all stages (in the background during the TAP stage, whose servers
# run from a private copy of PostgreSQL and never read the system's files).
stage_package() {
    log "package: postgresql-$PG_MAJOR-hilo built, checked with lintian, installed, tested, removed"
    ensure_packages "${HILO_PACKAGE_STAGE_PACKAGES[@]}"
    # pg_virtualenv (here and in the package's build and autopkgtest) makes
    # its cluster on $PGPORT if set: let it find a free port itself.
    unset PGHOST PGPORT
    local start=$SECONDS dir=$WORK/package version arch src deb changes out rc
    version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$HILO_ROOT/hilo.control")
    arch=$(dpkg --print-architecture)
    src=$dir/hilo-$version
    deb=$dir/postgresql-${PG_MAJOR}-hilo_${version}_$arch.deb
    changes=$dir/hilo_${version}_$arch.changes
    mkdir -p "$src"
    # Every file git knows or would add (tracked and untracked, not ignored).
    (cd "$HILO_ROOT" && git ls-files -co --exclude-standard -z |
        while IFS= read -r -d '' f; do if [ -e "$f" ]; then printf '%s\0' "$f"; fi; done |
        xargs -0 cp --parents -t "$src") || {
        fail 1 "package (copy of the tree)"
        return
    }

    if out=$(python3 "$src/test/package/check_meta.py" "$src" 2>&1); then
        echo "$out"
        pass 1
    else
        echo "$out"
        fail 1 "package META.json"
    fi
    local deb_version
    deb_version=$(cd "$src" && dpkg-parsechangelog -S Version) || true
    if [ "${deb_version%-*}" = "$version" ]; then
        echo "debian/changelog: $deb_version (hilo.control: $version)"
        pass 1
    else
        echo "debian/changelog has version $deb_version, hilo.control $version"
        fail 1 "package debian/changelog version"
    fi

    log "package: dpkg-buildpackage -us -uc -b -j$(nproc)"
    if ! (cd "$src" && dpkg-buildpackage -us -uc -b -j"$(nproc)") >"$dir/build.log" 2>&1 || [ ! -f "$deb" ]; then
        tail -60 "$dir/build.log"
        fail 1 "package build"
        return
    fi
    grep -E "tests (passed|failed)" "$dir/build.log" || true
    dpkg-deb -c "$deb" | awk '{print $6}' | grep -E 'hilo\.so$|\.control$|\.sql$' || true
    pass 1

    # README.md links to docs/: the pages travel with it.
    if dpkg-deb -c "$deb" | awk '{print $6}' | grep -q "/usr/share/doc/postgresql-$PG_MAJOR-hilo/docs/reference\.md$"; then
        echo "package: README.md's docs/ pages are in /usr/share/doc/postgresql-$PG_MAJOR-hilo"
        pass 1
    else
        fail 1 "package docs (README.md links to docs/, which the package lacks)"
    fi

    # Debian's build flags (COPT from pg_buildext) reach every object, the
    # C++ ones too: -ffile-prefix-map keeps the build's path out of them,
    # so the package builds the same from any directory.
    local compiles unmapped
    compiles=$(grep -cE '^(g\+\+|c\+\+|gcc|cc) .* -c ' "$dir/build.log" || true)
    unmapped=$(grep -E '^(g\+\+|c\+\+|gcc|cc) .* -c ' "$dir/build.log" | grep -vc -- '-ffile-prefix-map=' || true)
    if [ "${compiles:-0}" -gt 0 ] && [ "${unmapped:-0}" = 0 ]; then
        echo "package: all $compiles compiler calls had Debian's -ffile-prefix-map"
        pass 1
    else
        grep -E '^(g\+\+|c\+\+|gcc|cc) .* -c ' "$dir/build.log" | grep -v -- '-ffile-prefix-map=' | head -3 || true
        fail 1 "package build flags ($unmapped of $compiles compiler calls without -ffile-prefix-map)"
    fi

    log "package: lintian"
    rc=0
    lintian --fail-on error --display-info "$changes" >"$dir/lintian.log" 2>&1 || rc=$?
    grep -v "running with root privileges" "$dir/lintian.log" || true
    if [ $rc -eq 0 ] && ! grep -q '^E: ' "$dir/lintian.log"; then
        echo "lintian: no errors ($(grep -c '^W: ' "$dir/lintian.log" || true) warnings)"
        pass 1
    else
        fail 1 "package lintian"
    fi

    # Whatever hilo files the system has that no package owns (a make
    # install) are saved: installing the package replaces them.
    local saved=$dir/saved f was_installed=no
    dpkg-query -W -f='${Status}' "postgresql-$PG_MAJOR-hilo" 2>/dev/null | grep "install ok installed" >/dev/null &&
        was_installed=yes
    mkdir -p "$saved"
    for f in "/usr/lib/postgresql/$PG_MAJOR/lib/hilo.so" "/usr/share/postgresql/$PG_MAJOR/extension/hilo.control" \
        /usr/share/postgresql/"$PG_MAJOR"/extension/hilo--*.sql; do
        [ -f "$f" ] && ! dpkg -S "$f" >/dev/null 2>&1 || continue
        (cd / && cp -a --parents "${f#/}" "$saved/") || {
            fail 1 "package (could not save $f)"
            return
        }
    done
    trap 'stop_background; package_remove; cleanup_dirs' EXIT

    log "package: apt-get install ./$(basename "$deb")"
    if as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >"$dir/install.log" 2>&1 &&
        [ "$(dpkg-query -W -f='${Version}' "postgresql-$PG_MAJOR-hilo")" = "$deb_version" ]; then
        echo "installed postgresql-$PG_MAJOR-hilo $deb_version"
        pass 1
    else
        cat "$dir/install.log"
        fail 1 "package install"
        package_remove
        return
    fi

    # Tests against the system's PostgreSQL with the package's files, on
    # clusters pg_virtualenv makes and drops (as pg_buildext does).
    log "package: make installcheck without hilo preloaded must refuse"
    rc=0
    (cd "$src" && NONROOT=1 pg_virtualenv -v "$PG_MAJOR" make installcheck) >"$dir/nopreload.log" 2>&1 || rc=$?
    if [ $rc -ne 0 ] && grep -q "the server does not preload hilo" "$dir/nopreload.log"; then
        grep "the server does not preload hilo" "$dir/nopreload.log"
        pass 1
    else
        grep -v '^20[0-9][0-9]-' "$dir/nopreload.log" | grep -E "^(make|test |ok |not ok )|tests (passed|failed)" | tail -30
        fail 1 "package installcheck without preload (exit $rc)"
    fi

    # Preloaded as '$libdir/hilo', as PostgreSQL also accepts it: make
    # installcheck's preload check refused that spelling before.
    log "package: pgxn check (make installcheck), pgxn load and unload, hilo preloaded as \$libdir/hilo"
    (cd "$src" && NONROOT=1 pg_virtualenv -v "$PG_MAJOR" -o 'shared_preload_libraries=$libdir/hilo' -o hilo.naptime=200ms \
        -o hilo.pool_idle_timeout=1h -o hilo.allocator_idle_timeout=1h \
        sh -c 'pgxn check --make make ./ >"$1/check.log" 2>&1 || echo "pgxn check: exit $?" >>"$1/check.log"
               pgxn load --yes -d postgres ./ &&
               echo "loaded: $(psql -XAt -d postgres -c "SELECT extversion FROM pg_extension WHERE extname = '\''hilo'\''")" &&
               pgxn unload --yes -d postgres ./ &&
               echo "left: $(psql -XAt -d postgres -c "SELECT count(*) FROM pg_extension WHERE extname = '\''hilo'\''")"' \
        _ "$dir") >"$dir/pgxn.log" 2>&1 || true
    sed -n '1,/isolation install-check/p' "$dir/check.log" >"$dir/check-regress.log"
    sed -n '/isolation install-check/,$p' "$dir/check.log" >"$dir/check-isolation.log"
    grep -E "^(test |ok |not ok )|tests (passed|failed)|pgxn check: exit" "$dir/check.log" || tail -30 "$dir/check.log"
    [ -f "$src/regression.diffs" ] && head -100 "$src/regression.diffs"
    count_regress "$dir/check-regress.log" "package installcheck regress"
    count_regress "$dir/check-isolation.log" "package installcheck isolation"
    grep -E "^(loaded|left):" "$dir/pgxn.log" || true
    if grep -qx "loaded: $version" "$dir/pgxn.log" && grep -qx "left: 0" "$dir/pgxn.log"; then
        pass 1
    else
        grep -v '^20[0-9][0-9]-' "$dir/pgxn.log" | tail -20
        fail 1 "package pgxn load/unload"
    fi

    log "package: autopkgtest (debian/tests) on this host"
    (cd "$src" && make -s clean >/dev/null 2>&1) || true
    rc=0
    autopkgtest "$deb" "$src/" -- null >"$dir/autopkgtest.log" 2>&1 || rc=$?
    sed -n '/@@@@ summary/,/^autopkgtest.*resetting/p' "$dir/autopkgtest.log" | grep -v "^autopkgtest" || true
    if [ $rc -eq 0 ]; then
        pass 1
    else
        grep -v '^20[0-9][0-9]-' "$dir/autopkgtest.log" | tail -60
        fail 1 "package autopkgtest (exit $rc)"
    fi

    log "package: apt-get purge"
    package_remove
    trap 'stop_background; cleanup_dirs' EXIT
    if ! dpkg-query -W -f='${Status}' "postgresql-$PG_MAJOR-hilo" 2>/dev/null | grep "install ok installed" >/dev/null; then
        echo "postgresql-$PG_MAJOR-hilo removed$( [ -n "$(ls -A "$saved")" ] && echo "; restored: $(cd "$saved" && find . -type f | sed 's|^\.||' | tr '\n' ' ')")"
        [ "$was_installed" = no ] || echo "note: postgresql-$PG_MAJOR-hilo was installed before this stage and is no longer"
        pass 1
    else
        fail 1 "package remove"
    fi
    echo "package stage: $((SECONDS - start)) s"
}

# Purges the package if installed and restores what stage_package saved.
package_remove() {
    if dpkg-query -W -f='${Status}' "postgresql-$PG_MAJOR-hilo" 2>/dev/null | grep "install ok installed" >/dev/null; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "postgresql-$PG_MAJOR-hilo" >/dev/null 2>&1 || true
    fi
    local saved=$WORK/package/saved
    [ -d "$saved" ] && [ -n "$(ls -A "$saved")" ] && cp -a "$saved"/. / || true
}
