#!/bin/bash
f=$(cat /tmp/mode/flip); cpu=$(( ${OMPI_COMM_WORLD_RANK:-0} ^ f ))
exec taskset -c $cpu "$@"
