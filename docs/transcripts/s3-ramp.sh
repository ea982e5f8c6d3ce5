# docs/s3-tps-plateau.md: S3's plateau in miniature (one global lock held 10 ms per request).
. docs/transcripts/lib.sh
tpslab ramp tcp --serialize --server-serial 10ms --users 1..110 --step +10 --step-duration 3s --warmup 1s --svg "$W/s3.svg" --json "$REC" 2>/dev/null
