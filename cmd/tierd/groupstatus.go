package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/proto/tierdpb"
)

// showGroups prints the consumer groups the running tierd coordinates:
// nothing when no tierd runs or it coordinates none, a line when the
// call fails.
func showGroups(ctx context.Context, cfg config.Config, w io.Writer) {
	c, _, err := dialRunning(ctx, cfg)
	if err != nil || c == nil {
		return
	}
	defer c.Close()
	resp, err := c.Admin().ConsumerGroups(ctx, &tierdpb.ConsumerGroupsRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
		return
	case err != nil:
		fmt.Fprintf(w, "\nconsumer groups: %v\n", err)
		return
	}
	printGroups(w, resp.GetGroups())
}

// printGroups prints each group's state, then one line per partition it
// is assigned or has a commit for, as kafka-consumer-groups.sh --describe
// does: committed offset, high watermark, lag and the member assigned.
func printGroups(w io.Writer, groups []*tierdpb.ConsumerGroup) {
	fmt.Fprintf(w, "\nconsumer groups: %d\n", len(groups))
	for _, g := range groups {
		fmt.Fprintf(w, "%s: %s, generation %d, %s", g.GetGroup(), g.GetState(), g.GetGeneration(), plural(len(g.GetMembers()), "member", "members"))
		if g.GetProtocol() != "" {
			fmt.Fprintf(w, " (%s)", g.GetProtocol())
		}
		fmt.Fprintln(w)
		type row struct {
			offset *tierdpb.ConsumerGroupOffset
			member string
		}
		rows := map[string]*row{}
		var keys []string
		at := func(topic string, partition int32) *row {
			k := fmt.Sprintf("%s-%d", topic, partition)
			if rows[k] == nil {
				rows[k] = &row{}
				keys = append(keys, k)
			}
			return rows[k]
		}
		for _, o := range g.GetOffsets() {
			at(o.GetTopic(), o.GetPartition()).offset = o
		}
		for _, m := range g.GetMembers() {
			for _, tp := range m.GetAssigned() {
				at(tp.GetTopic(), tp.GetPartition()).member = fmt.Sprintf("%s %s %s", m.GetMemberId(), m.GetClientHost(), m.GetClientId())
			}
		}
		if len(keys) == 0 {
			continue
		}
		sort.Strings(keys)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  partition\tcommitted\thigh watermark served\tlag\tmember (id, host, client id)")
		for _, k := range keys {
			r := rows[k]
			committed, hw, lag := "-", "-", "-"
			if o := r.offset; o != nil {
				committed = fmt.Sprint(o.GetCommitted())
				if o.GetHighWatermark() >= 0 {
					hw, lag = fmt.Sprint(o.GetHighWatermark()), fmt.Sprint(o.GetLag())
				}
			}
			member := r.member
			if member == "" {
				member = "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", k, committed, hw, lag, member)
		}
		tw.Flush()
	}
}
