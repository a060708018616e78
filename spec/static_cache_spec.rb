# The static-file caches over real requests: open_file_cache: (open
# descriptors and stat results, trusted for valid: seconds, at most max:
# entries) and memory_cache: (the content of files up to max_file: bytes,
# budget: bytes in all). What each changes is visible from outside: a file
# removed after it was served is still served while its descriptor is
# cached; a file rewritten in place (same size, same mtime) is served from
# memory as it was.
require_relative 'spec_helper'

RSpec.describe 'static files: open_file_cache: and memory_cache:' do
  def start(opts)
    @root = File.join(spec_dir, 'www')
    FileUtils.mkdir_p(@root)
    %w[a b].each { |n| File.write(File.join(@root, "#{n}.txt"), "file #{n} v1\n") }
    @port = free_port
    @gw = start_gateway(<<~RUBY, ports: @port)
      server listen: "127.0.0.1:#{@port}", workers: 1 do
        location "/s/", alias: "www/"#{opts.empty? ? '' : ", #{opts}"}
      end
    RUBY
  end

  def get(name)
    r = http_get(@port, "/s/#{name}")
    [r.status, r.status == 200 ? r.body : nil]
  end

  # Rewrites the file in place (same inode, same size) and puts its mtime
  # back: nothing a stat() sees changes, only the bytes.
  def rewrite_in_place(name, text)
    path = File.join(@root, name)
    st = File.stat(path)
    raise 'same size needed' unless text.bytesize == st.size
    File.open(path, 'r+') { |f| f.write(text) }
    File.utime(st.atime, st.mtime, path)
  end

  describe 'open_file_cache:' do
    it 'valid: 30 keeps serving a file removed after it was served (its descriptor is cached)' do
      start('open_file_cache: { valid: 30 }, memory_cache: false')
      expect(get('a.txt')).to eq([200, "file a v1\n"])
      File.unlink(File.join(@root, 'a.txt'))
      expect(get('a.txt')).to eq([200, "file a v1\n"])
    end

    it 'false opens the file for every request: a removed file is 404 at once' do
      start('open_file_cache: false, memory_cache: false')
      expect(get('a.txt')).to eq([200, "file a v1\n"])
      File.unlink(File.join(@root, 'a.txt'))
      expect(get('a.txt')).to eq([404, nil])
    end

    it 'valid: 1 checks again after a second: the removed file turns 404 then, not before' do
      start('open_file_cache: { valid: 1 }, memory_cache: false')
      opened = GatewaySpec.now # the entry is trusted until 1 s after this request
      expect(get('a.txt')).to eq([200, "file a v1\n"])
      File.unlink(File.join(@root, 'a.txt'))
      expect(get('a.txt')).to eq([200, "file a v1\n"]) if GatewaySpec.now - opened < 0.9
      poll('the removal to be seen', timeout: 3) { get('a.txt') == [404, nil] }
      expect(GatewaySpec.now - opened).to be >= 0.9
    end

    it 'max: 1 keeps one entry: serving b.txt evicts a.txt, whose removal is then seen at once' do
      start('open_file_cache: { max: 1, valid: 30 }, memory_cache: false')
      expect(get('a.txt')).to eq([200, "file a v1\n"])
      expect(get('b.txt')).to eq([200, "file b v1\n"])
      File.unlink(File.join(@root, 'a.txt'))
      File.unlink(File.join(@root, 'b.txt'))
      expect(get('a.txt')).to eq([404, nil]) # evicted: opened again
      expect(get('b.txt')).to eq([404, nil]) # a.txt's 404 took the one entry
    end

    it 'a bad value is a config error naming the option' do
      @port = free_port
      st, out, = check_config(%(server listen: #{@port} do\n  location "/s/", root: "www", open_file_cache: { valid: -1 }\nend\n))
      expect(st).to eq(1), out
      expect(out).to include('open_file_cache: valid must be a positive number, got -1')
    end
  end

  describe 'memory_cache:' do
    it 'on (the default): a small file is served from memory, so an in-place rewrite that stat() cannot see is not served' do
      start('open_file_cache: { valid: 30 }')
      expect(get('a.txt')).to eq([200, "file a v1\n"])
      rewrite_in_place('a.txt', "file a v2\n")
      expect(get('a.txt')).to eq([200, "file a v1\n"])
    end

    it 'false reads the file through its descriptor: the in-place rewrite is served' do
      start('open_file_cache: { valid: 30 }, memory_cache: false')
      expect(get('a.txt')).to eq([200, "file a v1\n"])
      rewrite_in_place('a.txt', "file a v2\n")
      expect(get('a.txt')).to eq([200, "file a v2\n"])
    end

    it 'max_file: 4 holds no file of 10 bytes in memory: the in-place rewrite is served' do
      start('open_file_cache: { valid: 30 }, memory_cache: { max_file: 4 }')
      expect(get('a.txt')).to eq([200, "file a v1\n"])
      rewrite_in_place('a.txt', "file a v2\n")
      expect(get('a.txt')).to eq([200, "file a v2\n"])
    end

    it 'budget: 15 holds one 10-byte file, not two: the latest stays in memory, the other is read through its descriptor' do
      start('open_file_cache: { valid: 30 }, memory_cache: { budget: 15 }')
      expect(get('a.txt')).to eq([200, "file a v1\n"])
      expect(get('b.txt')).to eq([200, "file b v1\n"])
      rewrite_in_place('a.txt', "file a v2\n")
      rewrite_in_place('b.txt', "file b v2\n")
      expect([get('a.txt'), get('b.txt')]).to eq([[200, "file a v2\n"], [200, "file b v1\n"]])
    end

    it 'an unknown key is a config error naming the known ones' do
      @port = free_port
      st, out, = check_config(%(server listen: #{@port} do\n  location "/s/", root: "www", memory_cache: { size: 1 }\nend\n))
      expect(st).to eq(1), out
      expect(out).to include('memory_cache: unknown key :size (known: max_file, budget)')
    end
  end
end
