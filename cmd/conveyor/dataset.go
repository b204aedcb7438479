package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/conveyor-ml/conveyor/pipeline"
)

// imageFolderLayout is what an error about an ImageFolder tree tells the user to give.
const imageFolderLayout = "expected an ImageFolder tree DIR/CLASS/*.jpg (one folder per class)"

// pathError returns err about the path the user typed, as "PATH: reason": the reason of
// an *fs.PathError alone, since its own path may be another spelling of the same place.
func pathError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// checkDir reports, naming dir as typed, when dir does not exist or is not a directory.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return pathError(dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	return nil
}

// openImageFolder opens the ImageFolder tree dir (pipeline.Dir). Its errors name dir as the
// user typed it and, when dir has no class folders or they hold no images, say what layout
// is expected.
func openImageFolder(dir string) (pipeline.Source, error) {
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, pathError(dir, err)
	}
	classes, images := 0, 0
	for _, e := range ents {
		switch {
		case strings.HasPrefix(e.Name(), "."): // not a class, as in pipeline.ImageFolder
		case isDirEntry(dir, e):
			classes++
		case pipeline.IsImageName(e.Name()):
			images++
		}
	}
	if classes == 0 {
		if images > 0 {
			return nil, fmt.Errorf("%s: no class folders, only %d images directly inside; %s", dir, images, imageFolderLayout)
		}
		return nil, fmt.Errorf("%s: no class folders; %s", dir, imageFolderLayout)
	}
	src, err := pipeline.Dir(dir)
	if err != nil {
		if !hasImage(dir, ents) {
			return nil, fmt.Errorf("%s: no image files in its %d class folders (.jpg .jpeg .png .gif .bmp .tif .tiff .webp); %s",
				dir, classes, imageFolderLayout)
		}
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return src, nil
}

// isDirEntry follows a symbolic link to a directory, as pipeline.ImageFolder does.
func isDirEntry(dir string, e fs.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&fs.ModeSymlink == 0 {
		return false
	}
	fi, err := os.Stat(filepath.Join(dir, e.Name()))
	return err == nil && fi.IsDir()
}

// hasImage reports whether any class folder of dir holds an image file, stopping at the
// first. It runs only after listing failed, to tell an empty tree from another failure.
func hasImage(dir string, ents []fs.DirEntry) bool {
	found := errors.New("found")
	fsys := os.DirFS(dir) // walked as pipeline.ImageFolder walks it, a linked class included
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || !isDirEntry(dir, e) {
			continue
		}
		class := e.Name()
		err := fs.WalkDir(fsys, class, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return nil // what cannot be read is listing's error to report
			case d.IsDir() && p != class && strings.HasPrefix(d.Name(), "."):
				return fs.SkipDir
			case !d.IsDir() && pipeline.IsImageName(p):
				return found
			}
			return nil
		})
		if err == found {
			return true
		}
	}
	return false
}
