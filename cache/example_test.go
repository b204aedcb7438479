package cache_test

import (
	"fmt"
	"log"
	"os"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
)

func Example() {
	dir, err := os.MkdirTemp("", "cache-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	c, err := cache.Open(dir, &cache.Options{Codec: cache.S2})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	d := c.NewCoder() // one per goroutine
	defer d.Close()

	// The key names the source file as Stat reports it and the decode spec.
	key := cache.Key{
		Spec:    "max_pixels=178956970 orientation=exif resize=shorter(256) backend=go",
		Path:    "n01440764/n01440764_10026.JPEG",
		Size:    13697,
		ModTime: 1_356_998_400_000_000_000,
	}
	var img decode.Image
	img.Reset(4, 2)
	for i := range img.Pix {
		img.Pix[i] = uint8(i)
	}
	if err := d.Put(key, 7, &img); err != nil {
		log.Fatal(err)
	}

	ref, ok := c.Lookup(key)
	fmt.Println("hit:", ok, "label:", ref.Label, "size:", ref.Width, "x", ref.Height)
	var dst decode.Image
	got, err := d.Load(&dst, ref)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pixels:", got.Pix[:9])

	key.ModTime++ // the file changed: a miss, never stale pixels
	_, ok = c.Lookup(key)
	fmt.Println("after the file changed, hit:", ok)
	// Output:
	// hit: true label: 7 size: 4 x 2
	// pixels: [0 1 2 3 4 5 6 7 8]
	// after the file changed, hit: false
}
