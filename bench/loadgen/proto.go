package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The contract is compiled from the repository's .proto at start rather than
// generated into Go: the benchmark then always speaks the contract the gateway
// was built from, and filling messages by field name makes a renamed field an
// error at start instead of a silently missing value.

const protoFile = "oversell/v1/oversell.proto"

type contract struct {
	file protoreflect.FileDescriptor
}

func loadContract(path string) (*contract, error) {
	if path == "" {
		return nil, fmt.Errorf("--proto is required: pass the repository's proto/%s", protoFile)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(filepath.ToSlash(abs), "/"+protoFile) {
		return nil, fmt.Errorf("--proto %s: expected a path ending in %s (its imports resolve from the directory above oversell/)", path, protoFile)
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(abs)))
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{root}}),
	}
	files, err := c.Compile(context.Background(), protoFile)
	if err != nil {
		return nil, fmt.Errorf("compiling %s: %w", abs, err)
	}
	return &contract{file: files[0]}, nil
}

func mustContract(path string) *contract {
	c, err := loadContract(path)
	if err != nil {
		fatalf("%v", err)
	}
	return c
}

func (c *contract) message(name string) (protoreflect.MessageDescriptor, error) {
	md := c.file.Messages().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, fmt.Errorf("message %s is not in %s: the contract changed; update loadgen", name, protoFile)
	}
	return md, nil
}

// fields describes a message's values by field name; a nested fields value
// fills a message field.
type fields map[string]any

func field(md protoreflect.MessageDescriptor, name string) (protoreflect.FieldDescriptor, error) {
	fd := md.Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		return nil, fmt.Errorf("field %s.%s is not in %s: the contract changed; update loadgen", md.FullName(), name, protoFile)
	}
	return fd, nil
}

func newMessage(md protoreflect.MessageDescriptor, values fields) (*dynamicpb.Message, error) {
	m := dynamicpb.NewMessage(md)
	return m, fill(m, values)
}

func fill(m protoreflect.Message, values fields) error {
	md := m.Descriptor()
	for name, v := range values {
		fd, err := field(md, name)
		if err != nil {
			return err
		}
		if nested, ok := v.(fields); ok {
			if fd.Kind() != protoreflect.MessageKind || fd.IsList() || fd.IsMap() {
				return fmt.Errorf("field %s is not a message field", fd.FullName())
			}
			if err := fill(m.Mutable(fd).Message(), nested); err != nil {
				return err
			}
			continue
		}
		pv, err := scalar(fd, v)
		if err != nil {
			return err
		}
		m.Set(fd, pv)
	}
	return nil
}

// scalar converts a Go value to the field's own kind, refusing a kind
// mismatch: a field whose type changed must not be sent as something else.
func scalar(fd protoreflect.FieldDescriptor, v any) (protoreflect.Value, error) {
	mismatch := fmt.Errorf("field %s is %s in the contract, loadgen has %T: update loadgen", fd.FullName(), fd.Kind(), v)
	if fd.IsList() || fd.IsMap() {
		return protoreflect.Value{}, mismatch
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		if s, ok := v.(string); ok {
			return protoreflect.ValueOfString(s), nil
		}
	case protoreflect.BoolKind:
		if b, ok := v.(bool); ok {
			return protoreflect.ValueOfBool(b), nil
		}
	case protoreflect.DoubleKind:
		switch x := v.(type) {
		case float64:
			return protoreflect.ValueOfFloat64(x), nil
		case int:
			return protoreflect.ValueOfFloat64(float64(x)), nil
		}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		if i, ok := asInt(v); ok {
			return protoreflect.ValueOfInt64(i), nil
		}
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if i, ok := asInt(v); ok && i >= 0 {
			return protoreflect.ValueOfUint64(uint64(i)), nil
		}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		if i, ok := asInt(v); ok && i >= 0 && i <= 1<<32-1 {
			return protoreflect.ValueOfUint32(uint32(i)), nil
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		if i, ok := asInt(v); ok && i >= -1<<31 && i <= 1<<31-1 {
			return protoreflect.ValueOfInt32(int32(i)), nil
		}
	}
	return protoreflect.Value{}, mismatch
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		return int64(x), x <= 1<<63-1
	}
	return 0, false
}

// get reads a field by name from a received message; the names were checked
// against the contract at start (see resolve), so a miss here is a bug.
func get(m protoreflect.Message, name string) protoreflect.Value {
	return m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(name)))
}

func has(m protoreflect.Message, name string) bool {
	return m.Has(m.Descriptor().Fields().ByName(protoreflect.Name(name)))
}

// resolve checks at start that every dotted path (e.g. "latest.timestamp_ms")
// names a field, so reading answers by name later cannot silently read nothing.
func resolve(md protoreflect.MessageDescriptor, paths ...string) error {
	for _, p := range paths {
		cur := md
		for _, name := range strings.Split(p, ".") {
			if cur == nil {
				return fmt.Errorf("%s: %s.%s is not a message", p, md.FullName(), name)
			}
			fd, err := field(cur, name)
			if err != nil {
				return err
			}
			cur = fd.Message()
		}
	}
	return nil
}
