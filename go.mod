module github.com/conveyor-ml/conveyor

go 1.24

require (
	github.com/disintegration/imaging v1.6.2 // indirect
	github.com/ebitengine/purego v0.8.4 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/sync v0.16.0 // indirect
)
