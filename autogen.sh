#!/bin/sh
# Generate configure and the Makefile.in files (needs autoconf, automake, libtool, pkg-config).
set -e
cd "$(dirname "$0")"
mkdir -p config
autoreconf -fi "$@"
