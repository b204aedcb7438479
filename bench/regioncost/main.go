// Command regioncost measures what the train recipe's decode costs: it calls
// decode.Decoder.DecodeRegion on one RandomResizedCrop box (scale 0.08-1, ratio 3/4-4/3,
// seeded, so every build decodes the same boxes) of each file under DIR, to 224×224, once
// to warm up and then -rounds times, and prints the CPU time per decode in µs for each
// round. On a shared machine, where timings drift, count instructions instead:
//
//	go build -o /tmp/regioncost ./bench/regioncost
//	GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 valgrind --tool=callgrind /tmp/regioncost -n 200 -rounds 1 DIR
//
// (callgrind needs Go's asynchronous preemption off; its total counts the warm-up too.)
package main

import (
	"flag"
	"fmt"
	"image"
	"log"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"syscall"
	"time"

	"github.com/conveyor-ml/conveyor/decode"
)

// cpu returns the process's CPU time, user and system.
func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	rounds := flag.Int("rounds", 3, "timed passes over the boxes")
	prof := flag.String("cpuprofile", "", "write a CPU profile of the timed passes to this file")
	limit := flag.Int("n", 0, "use only the first n files (0: all)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: regioncost [-n N] [-rounds R] [-cpuprofile FILE] DIR")
		os.Exit(2)
	}
	var files []string
	err := filepath.Walk(flag.Arg(0), func(p string, i os.FileInfo, err error) error {
		if err == nil && !i.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	sort.Strings(files)
	if *limit > 0 && len(files) > *limit {
		files = files[:*limit]
	}
	d, err := decode.NewDecoder(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	rng := rand.New(rand.NewSource(1))
	type item struct {
		data []byte
		r    image.Rectangle
	}
	var items []item
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			log.Fatal(err)
		}
		c, err := d.Config(b)
		if err != nil {
			continue // not an image
		}
		W, H := c.Width, c.Height
		area := float64(W * H)
		r := image.Rect(0, 0, W, H)
		for t := 0; t < 10; t++ {
			ta := area * (0.08 + rng.Float64()*0.92)
			lr := math.Log(3.0/4) + rng.Float64()*(math.Log(4.0/3)-math.Log(3.0/4))
			ar := math.Exp(lr)
			w := int(math.Round(math.Sqrt(ta * ar)))
			h := int(math.Round(math.Sqrt(ta / ar)))
			if w > 0 && w <= W && h > 0 && h <= H {
				x := rng.Intn(W - w + 1)
				y := rng.Intn(H - h + 1)
				r = image.Rect(x, y, x+w, y+h)
				break
			}
		}
		items = append(items, item{b, r})
	}
	if *prof != "" {
		f, err := os.Create(*prof)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	var dst decode.Image
	for _, it := range items { // warm
		if _, err := d.DecodeRegion(&dst, it.data, it.r, 224, 224); err != nil {
			log.Fatal(err)
		}
	}
	for k := 0; k < *rounds; k++ {
		c0 := cpu()
		for _, it := range items {
			if _, err := d.DecodeRegion(&dst, it.data, it.r, 224, 224); err != nil {
				log.Fatal(err)
			}
		}
		fmt.Printf("%.1f\n", float64(cpu()-c0)/float64(time.Microsecond)/float64(len(items)))
	}
}
