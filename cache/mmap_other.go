//go:build !unix

package cache

import "errors"

func mapShard(*shard, int64) ([]byte, error) { return nil, errors.New("no mmap") }
func unmap([]byte) error                     { return nil }
func mapFile(uintptr, int64) ([]byte, error) { return nil, errors.New("no mmap") }
