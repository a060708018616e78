# include "conf.d/*.rb": other config files evaluated where the directive
# stands (mrblib/include.rb): globs sorted and relative to the including
# file, a missing literal file and include cycles refused, errors naming the
# included file and its line, a new file picked up by a reload.
require_relative 'spec_helper'
require 'fileutils'

RSpec.describe 'include' do
  # A folder with main.rb and the given files (relative path => text).
  def tree(main, files = {})
    dir = File.join(spec_dir, "tree-#{(@tree_seq = (@tree_seq || 0) + 1)}")
    files.each do |rel, text|
      FileUtils.mkdir_p(File.dirname(File.join(dir, rel)))
      File.write(File.join(dir, rel), text)
    end
    FileUtils.mkdir_p(dir)
    File.write(File.join(dir, 'main.rb'), main)
    File.join(dir, 'main.rb')
  end

  def check(path)
    r = run_gateway('-t', '-f', path)
    [r.exitstatus, r.output]
  end

  # `gateway -t` of a tree that must be refused: its folder and the output.
  def refused(main, files = {})
    path = tree(main, files)
    status, out = check(path)
    expect(status).to eq(1), out
    [File.dirname(path), out]
  end

  it 'serves what conf.d/*.rb define, read in sorted order, next to a literal include' do
    port = free_port
    site = free_port
    site_rb = <<~RUBY
      $order << 'site'
      server listen: "127.0.0.1:#{site}" do
        location "/" do "from conf.d/site.rb" end
      end
    RUBY
    files = { 'conf.d/20-b.rb' => "$order << 'b'\n", 'conf.d/10-a.rb' => "$order << 'a'\n",
              'conf.d/README' => "not ruby: not matched by *.rb\n", 'conf.d/site.rb' => site_rb,
              'shared.rb' => "$order << 'shared'\n" }
    path = tree(<<~RUBY, files)
      $order = []
      include "conf.d/*.rb"
      include "shared.rb"
      server listen: "127.0.0.1:#{port}" do
        order = $order.join(",")
        location "/" do order end
      end
    RUBY
    gw = start_gateway(File.read(path), ports: [port, site], name: path.delete_prefix("#{spec_dir}/"))
    expect(http_get(port, '/').body).to eq('a,b,site,shared')
    expect(http_get(site, '/').body).to eq('from conf.d/site.rb')
    expect(gw.alive?).to be true
  end

  it 'a glob that matches nothing is fine; a literal file that is missing is FILE:LINE of the include' do
    port = free_port
    ok = tree(<<~RUBY)
      include "conf.d/*.rb"
      server listen: "127.0.0.1:#{port}" do
        location "/" do "empty conf.d" end
      end
    RUBY
    status, out = check(ok)
    expect(status).to eq(0), out
    expect(out).to include('syntax is ok')
    start_gateway(File.read(ok), ports: port, name: ok.delete_prefix("#{spec_dir}/"))
    expect(http_get(port, '/').body).to eq('empty conf.d')

    dir, out = refused(<<~RUBY)
      server listen: "127.0.0.1:#{free_port}" do
        location "/" do "x" end
      end
      include "upstreams.rb"
    RUBY
    expect(out).to include("#{dir}/main.rb:4: include: no file #{dir}/upstreams.rb")
  end

  it 'an error inside an included file names that file and its line' do
    port = free_port
    dir, out = refused(<<~RUBY, 'conf.d/a.rb' => "x = 1\n\nraise \"bad value\"\n")
      include "conf.d/*.rb"
      server listen: "127.0.0.1:#{port}" do
        location "/" do "x" end
      end
    RUBY
    expect(out).to include("#{dir}/conf.d/a.rb:3: bad value")

    dir, out = refused("include \"conf.d/*.rb\"\n",
                       'conf.d/a.rb' => "\nserver listen: \"no port\" do\n  location(\"/\") { \"x\" }\nend\n")
    expect(out).to include("#{dir}/conf.d/a.rb:2: server: listen must be a port")

    dir, out = refused("include \"conf.d/*.rb\"\n", 'conf.d/a.rb' => "x = 1\nlocation \"/\" do ) end\n")
    expect(out).to match(%r{#{Regexp.escape(dir)}/conf\.d/a\.rb:2: ?syntax error})
  end

  it 'patterns are relative to the including file; an include cycle is refused' do
    port = free_port
    nested = tree(<<~RUBY, 'conf.d/site.rb' => "include \"parts/*.rb\"\n", 'conf.d/parts/p.rb' => "$part = 'nested'\n")
      include "conf.d/site.rb"
      server listen: "127.0.0.1:#{port}" do
        part = $part
        location "/" do part end
      end
    RUBY
    start_gateway(File.read(nested), ports: port, name: nested.delete_prefix("#{spec_dir}/"))
    expect(http_get(port, '/').body).to eq('nested')

    dir, out = refused("include \"conf.d/a.rb\"\n",
                       'conf.d/a.rb' => "include \"b.rb\"\n", 'conf.d/b.rb' => "\ninclude \"../main.rb\"\n")
    expect(out).to include("#{dir}/conf.d/b.rb:2: include:")
    expect(out).to include('an include cycle')
  end

  it 'is refused in a handler, at request time' do
    port = free_port
    late = <<~RUBY
      begin
        include "x.rb"
        "included at request time"
      rescue ArgumentError => e
        e.message
      end
    RUBY
    path = tree(<<~RUBY, 'x.rb' => "$x = 1\n", 'late.rb' => late)
      server listen: "127.0.0.1:#{port}" do
        location "/late", content: "late.rb"
      end
    RUBY
    start_gateway(File.read(path), ports: port, name: path.delete_prefix("#{spec_dir}/"))
    expect(http_get(port, '/late').body).to eq('include: only while a config file is read, at its top level')
  end

  it 'is refused inside a server block' do
    dir, out = refused(<<~RUBY, 'x.rb' => "$x = 1\n")
      server listen: "127.0.0.1:#{free_port}" do
        include "x.rb"
        location "/" do "x" end
      end
    RUBY
    expect(out).to include("#{dir}/main.rb:2: include: only at the top level")
  end

  it 'a reload (HUP) reads a file added to conf.d since' do
    a = free_port
    b = free_port
    path = tree(<<~RUBY)
      include "conf.d/*.rb"
      server listen: "127.0.0.1:#{a}" do
        location "/" do "main" end
      end
    RUBY
    gw = start_gateway(File.read(path), ports: a, name: path.delete_prefix("#{spec_dir}/"))
    expect(port_open?(b)).to be false
    FileUtils.mkdir_p(File.join(File.dirname(path), 'conf.d'))
    File.write(File.join(File.dirname(path), 'conf.d', 'new.rb'), <<~RUBY)
      server listen: "127.0.0.1:#{b}" do
        location "/" do "added by conf.d/new.rb" end
      end
    RUBY
    gw.signal('HUP')
    GatewaySpec.poll('the included server to answer', timeout: 10) do
      (http_get(b, '/', {}, timeout: 1).body rescue nil) == 'added by conf.d/new.rb'
    end
    expect(http_get(a, '/').body).to eq('main')
  end
end
