package pipeline

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
)

// openSample opens sample i of src and stats it, refusing directories.
func openSample(src Source, i int) (fs.File, fs.FileInfo, error) {
	f, err := src.Open(i)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && fi.IsDir() {
		err = errors.New("is a directory")
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// readWhole reads f, of size bytes when opened, into buf, which must hold size+1 bytes:
// the spare byte detects a file that grew since Stat. It returns what was read, also
// alongside an error.
func readWhole(f io.Reader, size int64, buf []byte) ([]byte, error) {
	n, err := io.ReadFull(f, buf[:size+1])
	switch {
	case err == nil:
		return buf[:n], fmt.Errorf("file grew beyond the %d bytes it had when opened", size)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return buf[:n], nil
	}
	return buf[:n], err
}

// specOf is the cache spec of decoding with o on backend: every option, with the backend
// that actually runs, since backends differ in their pixels.
func specOf(o decode.Options, backend string) string {
	o.Backend = backend
	return o.String()
}

// sampleKey is the cache key of sample i of src as fi describes it.
func sampleKey(spec string, src Source, i int, fi fs.FileInfo) cache.Key {
	return cache.Key{Spec: spec, Path: src.Path(i), Size: fi.Size(), ModTime: fi.ModTime().UnixNano()}
}
