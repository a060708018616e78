# frozen_string_literal: true
# layers_selftest.rb - tools/layers.rb on fake trees of three modules a, b, c,
# each one a.c + a.h compiled with gcc into build/obj/gateway/a.o like `rake`
# does.   ruby tools/layers_selftest.rb
require 'minitest/autorun'
require 'open3'
require 'tmpdir'
require 'fileutils'

class LayersSelftest < Minitest::Test
  TOOL = File.expand_path('layers.rb', __dir__)

  # calls: {"a" => ["b"]}: a.c includes b.h and calls b_f(). gem: same for
  # mrbgems/mruby-gateway-g/src/ (module "g/x").
  def tree(calls, layers: nil, gem: {})
    root = Dir.mktmpdir('layers')
    @roots << root
    gem_src = "#{root}/mrbgems/mruby-gateway-g/src"
    objs = []
    { "#{root}/gateway" => calls, gem_src => gem }.each do |dir, mods|
      FileUtils.mkdir_p(dir)
      mods.each do |mod, callees|
        File.write("#{dir}/#{mod}.h", "int #{mod}_f(int x);\n")
        body = callees.map { |m| "  x += #{m}_f(x);\n" }.join
        File.write("#{dir}/#{mod}.c", [mod, *callees].map { |m| %(#include "#{m}.h"\n) }.join +
                                      "int #{mod}_f(int x)\n{\n#{body}  return x;\n}\n")
        objs << ["#{dir}/#{mod}.c", dir == gem_src ? "#{root}/build/gems/mruby-gateway-g" : "#{root}/build/obj/gateway"]
      end
    end
    objs.each do |src, out|
      FileUtils.mkdir_p(out)
      system('gcc', '-c', "-I#{root}/gateway", "-I#{gem_src}", src, '-o', "#{out}/#{File.basename(src, '.c')}.o",
             exception: true)
    end
    if layers
      FileUtils.mkdir_p("#{root}/tools")
      File.write("#{root}/tools/layers.txt", layers)
    end
    root
  end

  def check(root, *args)
    out, status = Open3.capture2e('ruby', TOOL, '--root', root, *args)
    [out, status.exitstatus]
  end

  def setup
    @roots = []
  end

  def teardown
    @roots.each { |r| FileUtils.rm_rf(r) }
  end

  def test_a_cycle_of_three_modules_is_reported_with_its_path
    out, rc = check(tree({ 'a' => ['b'], 'b' => ['c'], 'c' => ['a'] }))
    assert_equal 1, rc, out
    assert_includes out, 'call graph: 3 modules, 3 edges, 1 cycle(s)'
    assert_includes out, 'a -> b (b_f) -> c (c_f) -> a (a_f)'
    assert_includes out, 'a -> b (a.c: b.h) -> c (b.c: c.h) -> a (c.c: a.h)'
  end

  def test_a_chain_without_a_cycle_passes
    out, rc = check(tree({ 'a' => ['b'], 'b' => ['c'], 'c' => [] }))
    assert_equal 0, rc, out
    assert_includes out, 'layers: OK'
  end

  def test_warn_only_exits_0_on_a_cycle
    _, rc = check(tree({ 'a' => ['b'], 'b' => ['a'] }), '--warn-only')
    assert_equal 0, rc
  end

  def test_a_call_up_the_declared_layers_fails_and_an_unplaced_module_warns
    root = tree({ 'a' => ['b'], 'b' => [], 'c' => [] }, layers: "# bottom first\nlow: a\nhigh: b zz\n")
    out, rc = check(root)
    assert_equal 1, rc, out
    assert_includes out, 'upward call: a [low] -> b [high] (b_f)'
    assert_includes out, 'unplaced in layers.txt: c'
  end

  def test_a_gem_cycle_and_the_core_calling_a_gem_are_reported
    root = tree({ 'a' => ['x'] }, gem: { 'x' => ['y'], 'y' => ['x'] })
    out, rc = check(root, '--dot', "#{root}/g.dot")
    assert_equal 1, rc, out
    assert_includes out, 'g/x -> g/y (y_f) -> g/x (x_f)'
    assert_includes out, 'gateway/ uses a gem: a -> g/x (x_f)'
    assert_includes File.read("#{root}/g.dot"), '"a" -> "g/x"'
  end
end
