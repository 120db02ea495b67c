#!/usr/bin/env bash
# Heketi, the REST front end of GlusterFS that the seed's in-tree `kubernetes.io/glusterfs`
# provisioner talks to, built from the Go module proxy for the tests that need it.
#
#   lab/heketi.sh build                  # prints the binary's path (cached by version)
#   lab/heketi.sh run DIR PORT ADMIN_KEY # serves on PORT (all interfaces): mock executor, JWT auth on
#
# Why v9: the proxy serves only github.com/heketi/heketi@v9.0.0+incompatible (/v10 is refused).
# v9 predates Go modules, so its dependencies are pinned here to what resolves on the proxy and
# compiles with today's Go. The mock executor serves the full REST API (clusters, nodes,
# devices, volumes, the async queue) and keeps volumes in its database without GlusterFS nodes.
set -euo pipefail

cache=${TFK8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfk8s}
version=9.0.0
dest=$cache/tools/heketi-$version
work=$cache/build/heketi
export GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=auto CGO_ENABLED=0
export GOMODCACHE=${GOMODCACHE:-$(go env GOMODCACHE)}

log() { printf '[heketi %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# Pins, each the newest that the proxy serves as a full (pseudo-)version and that v9 compiles with.
pins=(
  "github.com/heketi/heketi@v$version+incompatible"
  github.com/heketi/rest@v0.0.0-20180404230133-aa6a65207413
  github.com/heketi/tests@v0.0.0-20151005000721-f3775cbcefd6
  github.com/heketi/utils@v0.0.0-20170317161834-435bc5bdfa64
  github.com/lpabon/godbc@v0.1.1
  github.com/dgrijalva/jwt-go@v3.2.0+incompatible
  github.com/boltdb/bolt@v1.3.1
  github.com/urfave/negroni@v1.0.0
  # Heketi v9 imports Kubernetes 1.6-era internals (its kubeexec executor, compiled in).
  k8s.io/kubernetes@v1.6.13
  github.com/emicklei/go-restful@v1.1.3
  github.com/emicklei/go-restful-swagger12@v0.0.0-20170208215640-dcef7f557305
  github.com/docker/docker@v1.11.2
  github.com/docker/distribution@v2.6.2+incompatible
  github.com/ugorji/go@v0.0.0-20170107133203-ded73eae5db7
  # The rest were unpinned imports; these are what the proxy resolved on 2026-11-22, pinned so
  # that a later build does not drift to releases v9 was never compiled against.
  github.com/gorilla/mux@v1.8.1
  github.com/gorilla/context@v1.1.2
  github.com/spf13/cobra@v1.10.2
  github.com/auth0/go-jwt-middleware@v0.0.0-20200507191422-d30d7b9ece63
  github.com/prometheus/client_golang@v1.25.0
  github.com/go-ozzo/ozzo-validation@v3.6.0+incompatible
  golang.org/x/crypto@v0.58.0
  github.com/davecgh/go-spew@v1.1.1
  github.com/gogo/protobuf@v1.3.2
  github.com/golang/glog@v1.2.5
  github.com/mitchellh/go-wordwrap@v1.0.1
  github.com/go-openapi/spec@v1.0.1
  github.com/google/gofuzz@v1.2.0
  github.com/juju/ratelimit@v1.0.2
  github.com/asaskevich/govalidator@v0.0.0-20230301143203-a9d515a09cc2
  gopkg.in/inf.v0@v0.9.1
  github.com/ghodss/yaml@v1.0.0
  github.com/docker/spdystream@v0.0.0-20170912183627-bc6354cbbc29
  gopkg.in/yaml.v2@v2.4.0
)

build() {
  if [ -x "$dest/heketi" ]; then echo "$dest/heketi"; return; fi
  log "building Heketi v$version from the module proxy (41-95 s cold on 2 cores, by load)"
  rm -rf "$work" && mkdir -p "$work/local" && cd "$work"
  printf 'module tfk8s.local/heketi\n\ngo 1.25\n' >go.mod
  local pin requires=()
  for pin in "${pins[@]}"; do
    case $pin in \#*) continue ;; esac
    requires+=("-require=$pin")
  done
  go mod download k8s.io/kubernetes@v1.6.13 github.com/ugorji/go@v0.0.0-20170107133203-ded73eae5db7
  # client-go, apimachinery and apiserver of 2017 are refused by the proxy as modules of their own:
  # use the copies inside k8s.io/kubernetes@v1.6.13 (staging/), given a go.mod each.
  local m
  for m in apimachinery apiserver client-go; do
    cp -r "$GOMODCACHE/k8s.io/kubernetes@v1.6.13/staging/src/k8s.io/$m" "local/$m"
    chmod -R u+w "local/$m"
    printf 'module k8s.io/%s\n' "$m" >"local/$m/go.mod"
    requires+=("-replace=k8s.io/$m=./local/$m")
  done
  # That ugorji codec declares a base64 alphabet with a duplicate symbol ('_' twice); Go >= 1.22
  # panics on it at program start. It is only used when generating code, so any unused symbol
  # fixes it. Its separate codec module is dropped: the package comes from this copy.
  cp -r "$GOMODCACHE/github.com/ugorji/go@v0.0.0-20170107133203-ded73eae5db7" local/ugorji-go
  chmod -R u+w local/ugorji-go
  rm -f local/ugorji-go/codec/go.mod
  printf 'module github.com/ugorji/go\n' >local/ugorji-go/go.mod
  sed -i 's/0123456789__"/0123456789_$"/' local/ugorji-go/codec/gen.go
  requires+=("-replace=github.com/ugorji/go=./local/ugorji-go")
  go mod edit "${requires[@]}"
  mkdir -p "$dest.tmp"
  go build -trimpath -ldflags "-s -w -X main.HEKETI_VERSION=v$version" -o "$dest.tmp/heketi" github.com/heketi/heketi >&2
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  log "built $dest/heketi"
  echo "$dest/heketi"
}

run() {
  local dir=${1:?run DIR PORT ADMIN_KEY} port=${2:?port} key=${3:?admin key} binary
  binary=$(build)
  mkdir -p "$dir"
  # JWT on: every call but /hello needs a token signed with the admin (or user) key. The user
  # key is random: tfk8s only ever acts as admin, as the in-tree provisioner does.
  python3 - "$dir/heketi.json" "$port" "$key" "$dir/heketi.db" <<'PY'
import json, secrets, sys
path, port, key, db = sys.argv[1:]
config = {
    "port": port,
    "use_auth": True,
    "jwt": {"admin": {"key": key}, "user": {"key": secrets.token_urlsafe(24)}},
    "glusterfs": {"executor": "mock", "db": db},
}
with open(path, "w") as out:
    json.dump(config, out)
PY
  chmod 600 "$dir/heketi.json"
  exec "$binary" --config="$dir/heketi.json"
}

case ${1:-} in
  # Under a lock of hack/tools.sh's kind: `make test` may build it in the background while the
  # legacy test asks for it (lab/suite.py); the second asker waits, then finds it cached.
  build) mkdir -p "$cache/locks" && (flock 9 && build) 9>"$cache/locks/heketi.lock" ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 build | run DIR PORT ADMIN_KEY" >&2; exit 2 ;;
esac
