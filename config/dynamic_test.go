package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tierd/tierd/copier/topics"
)

// TestDynamicKeysMatch: for every setting, a reload carries a change over
// to the running config exactly when the setting is called dynamic, so
// what "config show" and the reload log say is what happens.
func TestDynamicKeysMatch(t *testing.T) {
	running := Default()
	for _, s := range Flatten(running) {
		next := Default()
		if !changeSetting(reflect.ValueOf(&next).Elem(), s.Key, "") {
			t.Fatalf("cannot change %s", s.Key)
		}
		merged := running.WithDynamic(next)
		carried := settingOf(merged, s.Key) != s.cmp
		dyn, _ := Diff(running, next)
		called := len(dyn) == 1 && dyn[0].Key == s.Key
		if carried != called {
			t.Errorf("%s: a reload calls the change dynamic %t, but carries it over: %t", s.Key, called, carried)
		}
	}
	// Per-topic settings: a topic added by a reload, with one key set:
	// that key is the one change (its unset keys are no change).
	next, off := Default(), false
	next.Copier.Topics = map[string]topics.TopicConfig{"orders": {RemoteStorageEnable: &off}}
	dyn, static := Diff(running, next)
	if len(static) != 0 || len(dyn) != 1 || dyn[0].Key != "copier.topics.orders.remote.storage.enable" {
		t.Errorf("a topic added: dynamic %v, static %v", dyn, static)
	}
}

func settingOf(c Config, key string) string {
	for _, s := range Flatten(c) {
		if s.Key == key {
			return s.cmp
		}
	}
	return ""
}

// changeSetting changes the leaf setting key (a full key) of struct value
// v, whatever its type.
func changeSetting(v reflect.Value, key, path string) bool {
	for _, f := range fields(v.Type()) {
		fv, k := v.FieldByIndex(f.index), join(path, f.key)
		if fv.Kind() == reflect.Struct && fv.Type() != durationType {
			if strings.HasPrefix(key, k+".") && changeSetting(fv, key, k) {
				return true
			}
			continue
		}
		if k != key {
			continue
		}
		switch fv.Kind() {
		case reflect.String:
			fv.SetString(fv.String() + "x")
		case reflect.Bool:
			fv.SetBool(!fv.Bool())
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			fv.SetInt(fv.Int() - 1)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			fv.SetUint(fv.Uint() + 1)
		case reflect.Float32, reflect.Float64:
			fv.SetFloat(fv.Float() / 2)
		case reflect.Slice:
			fv.Set(reflect.Append(fv, reflect.ValueOf("x")))
		case reflect.Map:
			m := reflect.MakeMap(fv.Type())
			m.SetMapIndex(reflect.ValueOf("x"), reflect.ValueOf("x"))
			fv.Set(m)
		case reflect.Pointer:
			n := reflect.New(fv.Type().Elem())
			if !fv.IsNil() {
				n.Elem().Set(fv.Elem())
			}
			if n.Elem().Kind() == reflect.Bool {
				n.Elem().SetBool(!n.Elem().Bool())
			} else {
				n.Elem().SetInt(n.Elem().Int() + 1)
			}
			fv.Set(n)
		default:
			return false
		}
		return true
	}
	return false
}

// TestReloadChunkCacheBudgets: the chunk cache's memory budget is dynamic;
// its disk budget is dynamic while the disk tier stays on, and a change
// turning the tier on or off is refused (restart needed) and keeps the
// running value; the chunk size stays static. The task interval is static
// as in Kafka (remote.log.manager.task.interval.ms is not among Kafka's
// dynamic broker configs), the copier pool dynamic (KIP-1105).
func TestReloadChunkCacheBudgets(t *testing.T) {
	running := Default()
	running.Fetch.Cache.DiskDir, running.Fetch.Cache.DiskBytes = t.TempDir(), 1<<30
	kinds := func(next Config) map[string]string {
		dyn, static := Diff(running, next)
		out := map[string]string{}
		for _, c := range dyn {
			out[c.Key] = "dynamic"
		}
		for _, c := range static {
			out[c.Key] = "static"
		}
		return out
	}
	next := running
	next.Fetch.Cache.MemoryBytes, next.Fetch.Cache.DiskBytes, next.Fetch.Cache.ChunkBytes = 64<<20, 1<<29, 1<<20
	next.Copier.TaskIntervalMs, next.Copier.CopierThreadPoolSize = 1000, 3
	got := kinds(next)
	for key, want := range map[string]string{
		"fetch.remote.fetch.chunk.cache.memory.bytes": "dynamic",
		DiskBudgetKey:                                       "dynamic",
		"fetch.remote.fetch.chunk.bytes":                    "static",
		"copier.remote.log.manager.task.interval.ms":        "static",
		"copier.remote.log.manager.copier.thread.pool.size": "dynamic",
	} {
		if got[key] != want {
			t.Errorf("%s: %q, want %s (all: %v)", key, got[key], want, got)
		}
	}
	merged := running.WithDynamic(next)
	if merged.Fetch.Cache.MemoryBytes != 64<<20 || merged.Fetch.Cache.DiskBytes != 1<<29 || merged.Fetch.Cache.ChunkBytes != running.Fetch.Cache.ChunkBytes {
		t.Errorf("merged cache config %+v", merged.Fetch.Cache)
	}
	if merged.MemoryLimit() >= running.MemoryLimit() {
		t.Errorf("a smaller memory budget left the memory limit at %d (was %d)", merged.MemoryLimit(), running.MemoryLimit())
	}

	off := running
	off.Fetch.Cache.DiskBytes = 0
	if k := kinds(off)[DiskBudgetKey]; k != "static" {
		t.Errorf("turning the disk tier off: %q, want static", k)
	}
	if m := running.WithDynamic(off); m.Fetch.Cache.DiskBytes != running.Fetch.Cache.DiskBytes {
		t.Errorf("turning the disk tier off carried over: %d", m.Fetch.Cache.DiskBytes)
	}
	noDisk := Default()
	on := noDisk
	on.Fetch.Cache.DiskDir, on.Fetch.Cache.DiskBytes = t.TempDir(), 1<<30
	dyn, _ := Diff(noDisk, on)
	for _, c := range dyn {
		if c.Key == DiskBudgetKey {
			t.Errorf("turning the disk tier on called dynamic")
		}
	}
}

// TestSecretsNotShown: a password never appears in config show nor in a
// reload's changes, though a change of it is seen.
func TestSecretsNotShown(t *testing.T) {
	a, b := Default(), Default()
	a.Kafka.Cluster.SASL.Password, b.Kafka.Cluster.SASL.Password = "hunter2", "swordfish"
	for _, s := range Flatten(a) {
		if strings.Contains(s.Value, "hunter2") {
			t.Errorf("%s shows the password", s.Key)
		}
	}
	_, static := Diff(a, b)
	if len(static) != 1 || static[0].Key != "kafka.sasl.password" || strings.Contains(fmt.Sprint(static), "hunter2") || strings.Contains(fmt.Sprint(static), "swordfish") {
		t.Errorf("diff %v", static)
	}
}
