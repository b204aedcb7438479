// Package objstore reads datasets that live outside the local file system: S3 and
// S3-compatible object stores (MinIO, Ceph, R2, GCS's XML API) and read-only HTTPS, next
// to plain local paths, all named by one dataset URL syntax.
//
// A dataset URL is a local path, file://path, s3://bucket/prefix or https://host/path,
// optionally a shard list: brace ranges such as s3://bucket/train-{000000..001023}.tar
// (zero padding kept, several braces multiply, {a,b,c} lists alternatives) or a glob
// (*, ?, [...]) in the last path element. [Resolve] turns one into a [Bucket] and the
// object names it selects.
//
// A [Bucket] makes single requests with retries: exponential backoff with full jitter on
// 5xx, 429 and S3's SlowDown, timeouts, reset connections, truncated bodies (a body
// shorter than its Content-Length, or one whose MD5 does not match a plain ETag), bodies
// that stall or trickle (less than Retry.MinProgressBytes in a Retry.ProgressInterval),
// and uploads whose body the store finds changed (BadDigest). A truncated or abandoned
// download resumes with a ranged GET pinned to the object's ETag. A missing object (404)
// or refused credentials (403) fail at once with an [*Error] naming the URL, and so does
// a listing that would not end (a continuation token given twice, more than
// Options.MaxListPages pages).
//
// A [ShardCache] turns a Bucket into an [io/fs.FS] of whole local files: Prefetch hints which
// objects come next and they are fetched concurrently (bounded) into a cache directory
// whose size stays under a byte limit; Open blocks until its object is local; objects
// nobody holds are evicted least recently used first, or at once with Release. Stats
// counts requests, bytes, retries, hits, misses and evictions.
//
// [OpenShards] puts the two together: a dataset URL becomes an fs.FS and its shard
// names, read in place when local and through a Cache when remote.
//
// S3 goes through aws-sdk-go-v2 with config.LoadDefaultConfig, so credentials and region
// come from the standard AWS chain (environment, shared config and credentials files,
// SSO, web identity as on EKS, ECS and EC2 instance roles) and AWS_ENDPOINT_URL /
// AWS_ENDPOINT_URL_S3 select an S3-compatible store; the SDK's own retries are switched
// off so the package counts and controls every attempt.
package objstore
