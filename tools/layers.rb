#!/usr/bin/env ruby
# frozen_string_literal: true
# layers.rb - proves that no include or call cycle joins files of gateway/ or
# files of one gem, and (with tools/layers.txt) that no file calls a layer
# above its own (docs/DESIGN.md §7).
#
#   rake check:layers                  build, then run this (LAYERS_ARGS='--warn-only')
#   ruby tools/layers.rb [--warn-only] [--dot FILE] [--root DIR]
#   ruby tools/layers_selftest.rb      its own test
#
# A module is a file's basename (http1_server.c + http1_server.h = "conn"; a header without a
# .c is its own module); a gem's module is "<gem>/<file>", the gem named
# without "mruby-gateway-"/"mruby-". Two graphs between modules:
#   include  a file's `#include "x.h"` lines that resolve to a file of the tree
#            (a gem's own src/ first, then gateway/); other headers are ignored.
#   call     A -> B when A's object (build/obj/gateway/**/*.o, build/gems/*/*.o)
#            has an undefined symbol that B's object defines (`nm -P -g`).
#            Taking a function's address counts as a use of its module; a call
#            through a pointer one was handed names no symbol and is no edge:
#            that is how a lower layer is meant to call upward.
# Reported, and exit 1 unless --warn-only: every strongly connected component
# of more than one module (shown as cycles through each of its modules), every
# edge from gateway/ into a gem, and, when tools/layers.txt exists, every edge
# from a lower layer to a higher one. Modules of gateway/ missing from
# layers.txt are listed as unplaced (a warning only).
require 'optparse'
require 'set'

module Layers
  Graph = Struct.new(:kind, :edges) do # edges: {from => {to => example}}
    def add(from, to, example)
      return if from == to

      (edges[from] ||= {})[to] ||= example
    end

    def nodes
      (edges.keys + edges.values.flat_map(&:keys)).uniq.sort
    end

    def succ(node)
      (edges[node] || {}).keys.sort
    end

    def each_edge(&blk)
      edges.keys.sort.each { |a| succ(a).each { |b| blk.call(a, b, edges[a][b]) } }
    end
  end

  module_function

  def gem_module(gem_dir, file)
    "#{File.basename(gem_dir).sub(/\Amruby-(gateway-)?/, '')}/#{File.basename(file).sub(/\.[cho]\z/, '')}"
  end

  # path => module for every .c and .h of gateway/ and of the gems' src/.
  def sources(root)
    core = Dir[File.join(root, 'gateway', '**', '*.{c,h}')].to_h { |f| [f, File.basename(f).sub(/\.[ch]\z/, '')] }
    gems = Dir[File.join(root, 'mrbgems', '*', 'src', '*.{c,h}')].to_h { |f| [f, gem_module(File.dirname(f, 2), f)] }
    core.merge(gems)
  end

  def include_graph(root)
    files = sources(root)
    # Every folder of gateway/ is on the include path: "x.h" is gateway/**/x.h.
    by_name = files.keys.select { |f| f.start_with?(File.join(root, 'gateway', '')) }.to_h { |f| [File.basename(f), f] }
    g = Graph.new('include', {})
    files.each do |path, mod|
      g.edges[mod] ||= {}
      File.foreach(path) do |line|
        next unless (name = line[/^\s*#\s*include\s*"([^"]+)"/, 1])

        target = File.join(File.dirname(path), name)
        target = by_name[name] unless files[target]
        g.add(mod, files[target], "#{File.basename(path)}: #{name}") if target
      end
    end
    g
  end

  # Objects whose source is in the tree: mrblib.o, gem_init.o, llhttp are not.
  def objects(root)
    objs = {}
    Dir[File.join(root, 'build', 'obj', 'gateway', '**', '*.o')].each do |o|
      src = File.join(root, o.delete_prefix(File.join(root, 'build', 'obj', '')).sub(/\.o\z/, '.c'))
      objs[o] = File.basename(o, '.o') if File.exist?(src)
    end
    Dir[File.join(root, 'build', 'gems', '*', '*.o')].each do |o|
      gem_dir = File.join(root, 'mrbgems', File.basename(File.dirname(o)))
      objs[o] = gem_module(gem_dir, o) if File.exist?(File.join(gem_dir, 'src', File.basename(o, '.o') + '.c'))
    end
    objs
  end

  def call_graph(root)
    objs = objects(root)
    abort "layers: no objects under #{root}/build: run `rake` first" if objs.empty?
    defined = {}
    undefined = Hash.new { |h, k| h[k] = [] }
    out = IO.popen(['nm', '-A', '-P', '-g', *objs.keys.sort], &:read)
    abort 'layers: nm failed' unless $?.success?
    out.each_line do |line|
      file, sym, type = line.split(/:?\s+/)
      mod = objs[file]
      if type == 'U' then undefined[mod] << sym
      elsif type =~ /\A[A-TV-Z]\z/ then defined[sym] ||= mod
      end
    end
    g = Graph.new('call', objs.values.to_h { |m| [m, {}] })
    undefined.each { |mod, syms| syms.sort.each { |s| g.add(mod, defined[s], s) if defined[s] } }
    g
  end

  # Tarjan's strongly connected components, those of more than one node.
  def cycles(graph)
    index = {}
    low = {}
    stack = []
    on = Set.new
    sccs = []
    visit = lambda do |v|
      index[v] = low[v] = index.size
      stack.push(v)
      on << v
      graph.succ(v).each do |w|
        if !index[w]
          visit.call(w)
          low[v] = [low[v], low[w]].min
        elsif on.include?(w)
          low[v] = [low[v], index[w]].min
        end
      end
      next unless low[v] == index[v]

      scc = []
      loop { w = stack.pop; on.delete(w); scc << w; break if w == v }
      sccs << scc.sort if scc.size > 1
    end
    graph.nodes.each { |v| visit.call(v) unless index[v] }
    sccs.sort
  end

  # The shortest cycle from `start` back to it inside `scc` (breadth first).
  def cycle_through(graph, scc, start)
    prev = {}
    queue = [start]
    until queue.empty?
      v = queue.shift
      graph.succ(v).each do |w|
        next unless scc.include?(w)

        if w == start
          path = [v]
          path.unshift(prev[path.first]) while path.first != start
          return path + [start]
        end
        next if prev.key?(w)

        prev[w] = v
        queue << w
      end
    end
  end

  def path_text(graph, path)
    path.each_cons(2).reduce(path.first) { |s, (a, b)| "#{s} -> #{b} (#{graph.edges[a][b]})" }
  end

  # Cycles enough to pass through every module of the component.
  def describe(graph, scc)
    covered = Set.new
    scc.filter_map do |m|
      next if covered.include?(m)

      path = cycle_through(graph, scc, m)
      covered.merge(path)
      path_text(graph, path)
    end
  end

  # [[layer name, [modules]]] from the bottom, or nil without the file.
  def read_layers(file)
    return nil unless File.exist?(file)

    File.readlines(file).filter_map do |line|
      line = line.sub(/#.*/, '').strip
      next if line.empty?

      name, mods = line.split(':', 2)
      [name.strip, mods.to_s.split]
    end
  end

  def write_dot(file, graphs)
    style = { 'include' => 'style=dashed color=gray40', 'call' => 'color=black' }
    File.open(file, 'w') do |f|
      f.puts 'digraph layers {', '  rankdir=BT; node [shape=box fontname="monospace"];'
      graphs.each do |g|
        g.each_edge { |a, b, _| f.puts %(  "#{a}" -> "#{b}" [#{style[g.kind]}];) }
      end
      f.puts '}'
    end
  end

  # Prints each graph's cycles and gateway/ -> gem edges; returns their count.
  def report_cycles(graphs)
    graphs.sum do |g|
      sccs = cycles(g)
      puts "#{g.kind} graph: #{g.nodes.size} modules, #{g.edges.values.sum(&:size)} edges, #{sccs.size} cycle(s)"
      sccs.each do |scc|
        puts "  cycle {#{scc.join(', ')}}"
        describe(g, scc).each { |text| puts "    #{text}" }
      end
      into_gems = []
      g.each_edge { |a, b, ex| into_gems << "#{a} -> #{b} (#{ex})" if !a.include?('/') && b.include?('/') }
      into_gems.each { |e| puts "  gateway/ uses a gem: #{e}" }
      sccs.size + into_gems.size
    end
  end

  # Prints every edge up the declared layers; returns their count.
  def report_layers(graphs, layers)
    level = {}
    layers.each_with_index { |(name, mods), i| mods.each { |m| level[m] = [i, name] } }
    puts "layers (#{layers.map(&:first).join(' < ')}):"
    up = 0
    graphs.each do |g|
      g.each_edge do |a, b, ex|
        next unless level[a] && level[b] && level[a][0] < level[b][0]

        puts "  upward #{g.kind}: #{a} [#{level[a][1]}] -> #{b} [#{level[b][1]}] (#{ex})"
        up += 1
      end
    end
    unplaced = graphs.flat_map(&:nodes).uniq.reject { |m| m.include?('/') || level[m] }
    puts "  warning: unplaced in layers.txt: #{unplaced.join(' ')}" unless unplaced.empty?
    up
  end

  def run(argv)
    opts = { root: File.expand_path('..', __dir__) }
    OptionParser.new do |o|
      o.banner = 'usage: ruby tools/layers.rb [--warn-only] [--dot FILE] [--root DIR]'
      o.on('--warn-only', 'report, but always exit 0') { opts[:warn_only] = true }
      o.on('--dot FILE', 'write the module graph for Graphviz') { |f| opts[:dot] = f }
      o.on('--root DIR', 'the tree to check (default: this checkout)') { |d| opts[:root] = d }
    end.parse!(argv)
    graphs = [include_graph(opts[:root]), call_graph(opts[:root])]
    problems = report_cycles(graphs)
    layers = read_layers(File.join(opts[:root], 'tools', 'layers.txt'))
    problems += report_layers(graphs, layers) if layers
    write_dot(opts[:dot], graphs) if opts[:dot]
    puts problems.zero? ? 'layers: OK' : "layers: #{problems} problem(s)"
    problems.zero? || opts[:warn_only] ? 0 : 1
  rescue OptionParser::ParseError => e
    abort "layers: #{e.message}"
  end
end

exit Layers.run(ARGV) if $PROGRAM_NAME == __FILE__
