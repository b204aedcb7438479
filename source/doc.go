// Package source holds the datasets a pipeline.Loader reads: ImageFolder trees (Dir,
// ImageFolder), sample lists (Manifest), WebDataset tar shards (WebDataset,
// WebDatasetGlob, WebDatasetFiles, a ShardIndex), datasets that conveyor convert stored
// (OpenConverted, locally or in object storage), views over them (Subset, Concat,
// Split), and Open, which opens whichever of these a URL names.
//
// A source is a pipeline.Source with the capabilities it has — pipeline.FileSource or
// pipeline.PixelSource, and pipeline.ShardedSource, MultiLabelSource, MetadataSource or
// EpochPlanner where they apply — the same exported interfaces a program's own source
// implements; the engine never asks for a concrete type of this package.
//
// Constructors that take options take a pointer as their last argument, nil meaning the
// defaults (Dir(dir, nil)); they copy it, fill its zero fields (EnsureDefaults) and check
// it (Validate, which reports every invalid field at once). Errors name the file, shard
// or URL concerned.
//
// Files by concern: folder.go and tree.go (ImageFolder trees), manifest.go, wds.go (the
// WebDataset source) with wds_options.go, wds_index.go (reading a shard's headers),
// wds_pack.go (numbering labels, lazy indexing) and wds_write.go; table.go (the label and
// metadata tables manifests and shards share); converted.go and converted_shards.go;
// dataset.go (Open), remote_converted.go (a converted dataset in object storage),
// upload.go, orphans.go and lease.go (conversions to object storage); shardindex.go;
// plan.go (prefetching shards in the loader's order); compose.go.
package source
