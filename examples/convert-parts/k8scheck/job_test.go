package k8scheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const manifest = "../k8s-indexed-job.yaml"

// decodeJob decodes a Job manifest strictly: YAML to JSON, then into batchv1.Job
// refusing unknown fields (a misspelt or misplaced key, which kubectl apply would reject
// or, worse, drop) and values of the wrong type (a quantity that does not parse).
func decodeJob(data []byte) (*batchv1.Job, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var job batchv1.Job
	if err := dec.Decode(&job); err != nil {
		return nil, err
	}
	return &job, nil
}

// checkJob checks what the example relies on: an Indexed Job of batch/v1 whose pods run
// conveyor convert --part env/N with N its completions, retried per index (so restart
// policy Never), each volume mounted declared, and requests within limits.
func checkJob(job *batchv1.Job) error {
	if job.APIVersion != "batch/v1" || job.Kind != "Job" {
		return fmt.Errorf("apiVersion %q, kind %q; want batch/v1 Job", job.APIVersion, job.Kind)
	}
	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		mode := "unset"
		if s.CompletionMode != nil {
			mode = string(*s.CompletionMode)
		}
		return fmt.Errorf("completionMode %s; want Indexed, which sets JOB_COMPLETION_INDEX", mode)
	}
	if s.Completions == nil || *s.Completions < 1 {
		return fmt.Errorf("completions %v; want the number of parts", s.Completions)
	}
	if s.Parallelism != nil && *s.Parallelism > *s.Completions {
		return fmt.Errorf("parallelism %d > completions %d", *s.Parallelism, *s.Completions)
	}
	if s.BackoffLimitPerIndex != nil && s.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		return fmt.Errorf("backoffLimitPerIndex needs restartPolicy Never, not %q", s.Template.Spec.RestartPolicy)
	}
	if p := s.Template.Spec.RestartPolicy; p != corev1.RestartPolicyNever && p != corev1.RestartPolicyOnFailure {
		return fmt.Errorf("restartPolicy %q; a Job's pods take Never or OnFailure", p)
	}
	cs := s.Template.Spec.Containers
	if len(cs) != 1 {
		return fmt.Errorf("%d containers, want 1", len(cs))
	}
	c := cs[0]
	if len(c.Command) < 4 || c.Command[0] != "conveyor" || c.Command[1] != "convert" {
		return fmt.Errorf("command %q; want conveyor convert SRC DST ...", c.Command)
	}
	parts := -1
	for _, a := range c.Command {
		if n, ok := strings.CutPrefix(a, "--part=env/"); ok {
			if parts, _ = strconv.Atoi(n); parts < 1 {
				return fmt.Errorf("%s: want --part=env/N with N ≥ 1", a)
			}
		}
	}
	if parts != int(*s.Completions) {
		return fmt.Errorf("--part=env/%d but completions %d: every index must convert a part of the same count", parts, *s.Completions)
	}
	var vols []string
	for _, v := range s.Template.Spec.Volumes {
		vols = append(vols, v.Name)
	}
	for _, m := range c.VolumeMounts {
		if !slices.Contains(vols, m.Name) {
			return fmt.Errorf("volumeMount %s names no volume (have %v)", m.Name, vols)
		}
	}
	for name, req := range c.Resources.Requests {
		if lim, ok := c.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
			return fmt.Errorf("%s request %s above its limit %s", name, req.String(), lim.String())
		}
	}
	return nil
}

// The example's manifest is a valid Indexed Job: strictly decoded into the API types
// and checked as above.
func TestIndexedJobManifest(t *testing.T) {
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	job, err := decodeJob(data)
	if err != nil {
		t.Fatalf("%s: %v", manifest, err)
	}
	if err := checkJob(job); err != nil {
		t.Fatalf("%s: %v", manifest, err)
	}
}

// The checks refuse what they are for: each change below to the manifest is an error.
func TestIndexedJobManifestMistakes(t *testing.T) {
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, tc := range []struct{ name, old, new string }{
		{"misspelt field", "completions: 16", "completion: 16"},
		{"field in the wrong place", "  parallelism: 16", "  replicas: 16"},
		{"quantity that does not parse", "memory: 8Gi\n            limits", "memory: 8 gigs\n            limits"},
		{"parts disagree", "--part=env/16", "--part=env/8"},
		{"not indexed", "completionMode: Indexed", "completionMode: NonIndexed"},
		{"restart policy", "restartPolicy: Never", "restartPolicy: OnFailure"},
		{"mount of no volume", "- name: dst\n              mountPath", "- name: out\n              mountPath"},
	} {
		if !strings.Contains(text, tc.old) {
			t.Fatalf("%s: the manifest has no %q", tc.name, tc.old)
		}
		job, err := decodeJob([]byte(strings.Replace(text, tc.old, tc.new, 1)))
		if err == nil {
			err = checkJob(job)
		}
		if err == nil {
			t.Errorf("%s (%q for %q): accepted", tc.name, tc.new, tc.old)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}
