module github.com/conveyor-ml/conveyor

go 1.25

require (
	github.com/disintegration/imaging v1.6.2
	github.com/ebitengine/purego v0.8.4
	golang.org/x/image v0.30.0
	golang.org/x/sync v0.16.0
)

require github.com/klauspost/compress v1.20.3
