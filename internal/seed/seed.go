// Package seed derives independent 64-bit seeds from tuples such as (seed, epoch, index),
// so every random stream in conveyor is a pure function of its coordinates.
package seed

// Mix combines a and b with splitmix64's finaliser. Nearby inputs give unrelated outputs,
// which makes Mix(Mix(seed, epoch), index) a good per-sample seed.
func Mix(a, b uint64) uint64 {
	z := a*0x9e3779b97f4a7c15 + b + 0x632be59bd9b4e019
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
